"""common.args: the one checker every public function uses. Each class of bad input gets one
sentence of the right exception type; good input converts as a numpy user expects."""
import numpy as np
import pytest

from common import args as A


@pytest.mark.parametrize("x,exc,word", [
    (None, TypeError, "None"),
    ("abc", TypeError, "string"),
    (np.ones(3, complex), TypeError, "complex"),
    (np.ones(3, bool), TypeError, "boolean"),
    (np.array(["a", "b"]), TypeError, "dtype"),
    ([[1, 2], [3]], ValueError, "ragged"),
])
def test_floats_refuses_what_is_not_real_numbers(x, exc, word):
    with pytest.raises(exc, match=word):
        A.floats(x, "x")


def test_floats_converts_and_checks_shape():
    a = A.floats([[1, 2, 3]], "x", ndim=2)
    assert a.dtype == np.float32 and a.flags.c_contiguous and a.shape == (1, 3)
    assert A.floats(np.arange(6.0).reshape(2, 3).T, "x").flags.c_contiguous
    with pytest.raises(ValueError, match=r"x must be 2-D \[rows, cols\], got shape \(3,\)"):
        A.floats([1, 2, 3], "x", ndim=2, what="[rows, cols]")
    with pytest.raises(ValueError, match=r"must have shape \(4,\), got \(3,\)"):
        A.floats([1, 2, 3], "bias", shape=(4,))
    assert A.floats(np.zeros((2, 5)), "x", shape=(None, 5)).shape == (2, 5)
    with pytest.raises(ValueError, match="1-D or 2-D"):
        A.floats(np.zeros((1, 1, 1)), "x", ndim=(1, 2))


def test_integers_refuse_fractions_and_out_of_range():
    assert A.integers([0.0, 2.0], "y", low=0, high=3).tolist() == [0, 2]
    with pytest.raises(ValueError, match=r"whole numbers; y\[1\] = 2.5"):
        A.integers([1.0, 2.5], "y", low=0, high=10)
    with pytest.raises(ValueError, match=r"y\[1\] = 10 lies outside \[0, 10\)"):
        A.integers([3, 10], "y", low=0, high=10)
    with pytest.raises(ValueError, match="outside"):
        A.integers([-1], "y", low=0, high=10)
    with pytest.raises(ValueError, match="outside"):  # too big for int32: reported, not wrapped
        A.integers([2 ** 40], "y")
    with pytest.raises(ValueError, match="whole numbers"):
        A.integers([np.nan], "y", low=0, high=3)
    with pytest.raises(TypeError, match="booleans"):
        A.integers([True], "y", low=0, high=3)
    assert A.integers(np.array([], np.int64), "y", low=0, high=3).size == 0
    assert A.uint8([[0, 255]], "img").dtype == np.uint8
    with pytest.raises(ValueError, match="outside"):
        A.uint8([256], "img")


def test_version_lists_the_versions():
    vs = {"v1": "a", "v2": "b"}
    assert A.version("v2", vs) == "v2"
    with pytest.raises(ValueError, match="unknown version 'v7': this function has v1, v2"):
        A.version("v7", vs)
    with pytest.raises(TypeError, match="version must be a name"):
        A.version(2, vs)


def test_scalars():
    assert A.count(3.0, "bins") == 3 and A.count(np.int64(5), "n") == 5
    with pytest.raises(TypeError, match="integer"):
        A.count(2.5, "bins")
    with pytest.raises(TypeError, match="integer"):
        A.count(True, "bins")
    with pytest.raises(ValueError, match="between 1 and 4096, got 0"):
        A.count(0, "bins", low=1, high=4096)
    assert A.real(1e-5, "eps", low=0, low_open=True) == 1e-5
    with pytest.raises(ValueError, match="> 0"):
        A.real(0.0, "eps", low=0, low_open=True)
    with pytest.raises(ValueError, match="finite"):
        A.real(float("inf"), "scale")
    with pytest.raises(TypeError, match="real number"):
        A.real("1", "scale")
    with pytest.raises(ValueError, match="one of 'gelu', 'relu'"):
        A.choice("tanh", "act", ["gelu", "relu"])
    with pytest.raises(ValueError, match="one shape"):
        A.same_shape(a=np.zeros(3), b=np.zeros(4))
    with pytest.raises(ValueError, match="32-bit"):
        A.fits_int32("x", 2 ** 31)
