"""One package a day: days/dayNN_<slug>/ holds README.md, kernel.cu, reference.py, driver.py."""
