#!/usr/bin/env python3
"""Day 33 without a GPU: the driver's launches run on the host emulator (.notes/day33_emu.h).

kernel.cu (with common/cuda/philox.cuh) is compiled as host C++ into an interpreter of launch
scripts. The driver's own `launch` / public functions run unchanged against a fake pycuda: a
fake K records every prepared_call (kernel, grid, block, arguments), a fake DeviceCase holds
numpy buffers (outputs poisoned with 0xFF bytes = NaN, as the harness does); the recorded
launches then execute in the interpreter, and the outputs are compared with the reference.

    .venv/bin/python .notes/day33_emulate.py          # every version at every CHECK_SIZES entry
    .venv/bin/python .notes/day33_emulate.py sweep    # + the sweep candidates (-DDAY33_SWEEP)

Checks: indexing and bounds at ragged sizes (unwritten elements stay NaN), the image walk, the
Philox words bit for bit (integer code is exact on the host), the normals to the tolerance
(the host's sin/log differ from the GPU's by an ulp or two). Nothing about speed.
"""
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

NOTES = Path(__file__).resolve().parent
ROOT = NOTES.parent
sys.path.insert(0, str(ROOT))

from common import harness as H  # noqa: E402
from common.check import compare_all  # noqa: E402

# --- the interpreter ------------------------------------------------------------------------------

MAIN = r"""
#include EMU_HEADER
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>
#include KERNEL_SRC

struct Arg {
    void* p = nullptr; long long v = 0;
    template <class T> operator T*() const { return (T*)p; }
    operator int() const { return (int)v; }
    operator unsigned() const { return (unsigned)v; }
    operator long long() const { return v; }
    operator float() const { float f; unsigned u = (unsigned)v; std::memcpy(&f, &u, 4); return f; }
};
using Fn = void (*)(std::vector<Arg>&);
static std::map<std::string, Fn> table = {
DISPATCH
};

int main(int argc, char** argv) {
    std::ifstream in(argv[1]);
    std::map<std::string, std::vector<unsigned char>> bufs;
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream ss(line);
        std::string op; ss >> op;
        if (op == "buf") {                     // buf NAME BYTES FILE|-
            std::string name, file; size_t bytes; ss >> name >> bytes >> file;
            auto& b = bufs[name];
            b.assign(bytes + 64, 0xFF);
            if (file != "-") { std::ifstream f(file, std::ios::binary); f.read((char*)b.data(), bytes); }
        } else if (op == "launch") {           // launch NAME gx gy gz bx by bz ARGS (P:name / v:int)
            std::string name; dim3 g, b; ss >> name >> g.x >> g.y >> g.z >> b.x >> b.y >> b.z;
            std::vector<Arg> args; std::string a;
            while (ss >> a) {
                Arg x;
                if (a[0] == 'P') x.p = bufs.at(a.substr(2)).data(); else x.v = std::stoll(a.substr(2));
                args.push_back(x);
            }
            auto it = table.find(name);
            if (it == table.end()) { std::fprintf(stderr, "no kernel %s\n", name.c_str()); return 2; }
            emu_launch(g, b, [&] { it->second(args); });
        } else if (op == "cluster") {          // cluster K: the next launches run K blocks at once
            int k; ss >> k; emu_set_cluster(k);
        } else if (op == "out") {              // out NAME BYTES FILE
            std::string name, file; size_t bytes; ss >> name >> bytes >> file;
            std::ofstream f(file, std::ios::binary); f.write((const char*)bufs.at(name).data(), bytes);
        }
    }
    return 0;
}
"""


def kernel_names(src: str) -> dict:
    """name -> argument count of every extern "C" entry point (macro-made ones included)."""
    out = {}
    for m in re.finditer(r'extern "C" __global__ void (?:__launch_bounds__\([^)]*\) )?(\w+)\(([^)]*)\)', src):
        if m.group(1).isupper():                  # inside a #define: its instances come apart
            continue
        out[m.group(1)] = m.group(2).count(",") + 1
    return out


class Emulator:
    """Compiles kernel.cu once as an interpreter; runs recorded launch lists."""

    def __init__(self, kernel: Path, kernels: dict, defines=(), workdir=None, header="day33_emu.h",
                 cluster_of=None):
        self.dir = Path(workdir or tempfile.mkdtemp(prefix="emu_"))
        disp = ",\n".join(
            f'{{"{k}", [](std::vector<Arg>& a) {{ {k}({", ".join(f"a[{i}]" for i in range(n))}); }}}}'
            for k, n in kernels.items())
        main = self.dir / "main.cpp"
        main.write_text(MAIN.replace("DISPATCH", disp))
        self.exe = self.dir / "emu"
        cmd = ["g++", "-std=c++20", "-O2", "-w", "-pthread", f"-I{NOTES}", f"-I{ROOT / 'common/cuda'}",
               f'-DKERNEL_SRC="{kernel}"', f'-DEMU_HEADER="{header}"', *[f"-D{d}" for d in defines],
               str(main), "-o", str(self.exe)]
        self.cluster_of = cluster_of or (lambda name: 1)
        subprocess.run(cmd, check=True)
        self.count = 0

    def run(self, buffers: dict, launches: list, outputs: list) -> dict:
        """buffers: name -> numpy array or ("empty", nbytes); launches: (name, grid, block, args)
        with args ("P", bufname) / ("v", int); outputs: names to read back."""
        self.count += 1
        d = self.dir / f"run{self.count}"
        d.mkdir()
        lines, shapes = [], {}
        for name, a in buffers.items():
            if isinstance(a, tuple):
                lines.append(f"buf {name} {a[1]} -")
            else:
                f = d / f"{name}.bin"
                np.ascontiguousarray(a).tofile(f)
                lines.append(f"buf {name} {a.nbytes} {f}")
        for name, grid, block, args in launches:
            lines.append(f"cluster {self.cluster_of(name)}")
            sargs = " ".join(f"P:{v}" if k == "P" else f"v:{int(v)}" for k, v in args)
            lines.append(f"launch {name} {' '.join(map(str, grid))} {' '.join(map(str, block))} {sargs}")
        for name, nbytes in outputs:
            lines.append(f"out {name} {nbytes} {d / (name + '.out')}")
        (d / "script").write_text("\n".join(lines) + "\n")
        subprocess.run([str(self.exe), str(d / "script")], check=True)
        return {name: (d / (name + ".out")).read_bytes() for name, _ in outputs}


# --- a fake pycuda for the driver ---------------------------------------------------------------------

class Buf(str):
    """A device pointer: the buffer's name."""


class FakeFn:
    def __init__(self, rec, name, sig):
        self.rec, self.name, self.sig = rec, name, sig

    def prepared_call(self, grid, block, *args, shared_size=0):
        assert len(args) == len(self.sig or args), (self.name, self.sig, args)
        conv = []
        for c, a in zip(self.sig or "P" * len(args), args):
            if c == "P":
                assert isinstance(a, Buf), (self.name, a)
                conv.append(("P", str(a)))
            elif c == "f":
                conv.append(("v", int(np.float32(a).view(np.uint32))))
            else:
                conv.append(("v", int(a)))
        for g in grid:
            assert 1 <= g < 2 ** 31, (self.name, grid)
        self.rec.append((self.name, tuple(grid), tuple(block), conv))


class FakeK:
    def __init__(self):
        self.rec = []

    def __call__(self, name, signature=None, dynamic_smem=0):
        return FakeFn(self.rec, name, signature)


class FakeDeviceCase:
    def __init__(self, case):
        self.case, self.size, self.params = case, case.size, case.params
        self.arrays = {k: np.ascontiguousarray(v) for k, v in case.inputs.items()}
        for k, (shape, dt) in case.outputs.items():
            self.arrays[k] = ("empty", int(np.prod(shape, dtype=np.int64)) * np.dtype(dt).itemsize)
        self.scratch_bufs = {}

    def __getattr__(self, name):
        if name in self.__dict__.get("arrays", {}):
            return Buf(name)
        raise AttributeError(name)

    def array(self, name):
        raise RuntimeError("array(): no device arrays in the emulator")

    def scratch(self, name, shape, dtype=np.float32, zero=False):
        nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        self.arrays["scratch_" + name] = np.zeros(nbytes, np.uint8) if zero else ("empty", nbytes)
        return Buf("scratch_" + name)


def emu_run(emu, drv, launch, version, case) -> dict:
    """What H.run(launch, version, case) returns, computed on the emulator."""
    k = FakeK()
    old = drv.K
    drv.K = k
    try:
        d = FakeDeviceCase(case)
        launch(version, d)
    finally:
        drv.K = old
    outs = [(n, int(np.prod(s, dtype=np.int64)) * np.dtype(dt).itemsize) for n, (s, dt) in case.outputs.items()]
    raw = emu.run(d.arrays, k.rec, outs)
    return {n: np.frombuffer(raw[n], np.dtype(dt)).reshape(s).copy() for n, (s, dt) in case.outputs.items()}


# --- day 33 ------------------------------------------------------------------------------------------

def main():
    from days.day33_ddpm_kernel import driver as D
    from days.day33_ddpm_kernel import reference as R

    sweep = "sweep" in sys.argv[1:]
    kpath = ROOT / "days/day33_ddpm_kernel/kernel.cu"
    src = kpath.read_text()
    names = kernel_names(src)
    for m in re.finditer(r"\b(NOISE_VEC|STEP_VEC)\((\w+), \w+, \w+\)", src):
        if not m.group(2).isupper():
            names[m.group(2)] = 10
    if not sweep:
        names = {k: v for k, v in names.items() if "_cand_" not in k}
    emu = Emulator(kpath, names, ["DAY33_SWEEP"] if sweep else [])
    real_run = H.run
    H.run = lambda launch, version, case: emu_run(emu, D, launch, version, case)
    fails = 0
    try:
        # the block function against the known answers and random inputs, bit for bit
        exact = D.bit_exact_check(stream_words=1 << 14, random_blocks=1 << 12)
        print("bit exact:", exact)
        fails += sum(bad for _, bad in exact.values()) > 0
        # every version, every check size
        versions = list(D.VERSIONS)
        for size in list(D.CHECK_SIZES) + [D.SIZES["small"]]:
            case = D.make_case(size, np.random.default_rng(hash(size) & 0xFFFF))
            exp = case.expected()
            res = []
            for v in versions:
                out = emu_run(emu, D, D.launch, v, case)
                r = compare_all(out, exp, case.tolerance())
                res.append(f"{v} {'ok' if r.ok else 'FAIL ' + r.message}")
                fails += not r.ok
                # the noise itself, exactly as the stream's words say (eps is the noise)
            print(H.size_str(size), "|", ", ".join(res))
        if sweep:
            for u in (1, 2, 4):
                for f in (0, 1):
                    for size in [(5, 3), (3, 33), (1, 100003), (17, 3000)]:
                        case = D.make_case(size, np.random.default_rng(5))
                        k = FakeK()

                        def go(_, d, u=u, f=f):
                            b, n = d.size
                            tot = b * n
                            k0, k1 = d.params["key"]
                            s0, s1 = d.params["sub_noise"]
                            t0, t1 = d.params["sub_step"]
                            grid = ((H.cdiv(H.cdiv(tot, 4), 256 * u), 1, 1), (256, 1, 1))
                            D.K(f"ddpm_noise_cand_u{u}_f{f}", "PPPPiiIIII").prepared_call(
                                *grid, d.x0, d.coef_noise, d.xt, d.eps, tot, n, k0, k1, s0, s1)
                            D.K(f"ddpm_step_cand_u{u}_f{f}", "PPPPiiIIII").prepared_call(
                                *grid, d.xt_in, d.eps_theta, d.coef_step, d.x_prev, tot, n, k0, k1, t0, t1)
                        out = emu_run(emu, D, go, "cand", case)
                        r = compare_all(out, case.expected(), case.tolerance())
                        fails += not r.ok
                        print(f"cand u{u} f{f} {H.size_str(size)}: {'ok' if r.ok else 'FAIL ' + r.message}")
        # the public functions end to end
        x0 = np.random.default_rng(1).standard_normal((3, 2, 5, 7)).astype(np.float32)
        t = np.array([0, 500, 999])
        for v in versions:
            xt, eps = D.ddpm_noise(x0, t, 2 ** 40 + 5, 3, version=v)
            rxt, reps = R.ddpm_noise(x0, t, 2 ** 40 + 5, 3)
            xp = D.ddpm_step(xt, eps, t, 11, 4, version=v)
            rxp = R.ddpm_step(xt, eps, t, 11, 4)
            r = compare_all({"xt": xt, "eps": eps, "xp": xp}, {"xt": rxt, "eps": reps, "xp": rxp}, 1e-5)
            z = D.normals(1001, 9, 2 ** 35, version=v)
            rz = compare_all({"z": z}, {"z": R.normals(1001, 9, 2 ** 35)}, 1e-5)
            print(f"public functions {v}: {'ok' if r.ok and rz.ok else 'FAIL ' + r.message + rz.message}")
            fails += not (r.ok and rz.ok)
        w = D.philox_stream(1003, 2 ** 64 - 1, 2 ** 64 - 1)
        ok = np.array_equal(w, R.stream_words(1003, 2 ** 64 - 1, 2 ** 64 - 1))
        print("philox_stream, all-ones seed and subsequence:", "exact" if ok else "DIFFERS")
        fails += not ok
    finally:
        H.run = real_run
    print("FAILURES:", fails)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
