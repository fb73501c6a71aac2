// Days 15 and 20: run the v4 kernels on the host emulator (day15_20_emu.h) against float64
// references, at sizes that hit every tile edge, with small persistent grids so that blocks
// walk several tiles. Built and run by .notes/day15_20_emulate.py (g++ -std=c++20 -pthread).
#include "day15_20_emu.h"

namespace d15 {
#include KERNEL15
}
namespace d20 {
#include KERNEL20
}

#include <algorithm>
#include <cstdio>
#include <random>
#include <string>

static int failures = 0;

struct Data {
    std::mt19937_64 g;
    explicit Data(uint64_t seed) : g(seed) {}
    std::vector<float> normal(size_t n, double sd) {
        std::normal_distribution<double> nd(0.0, sd);
        std::vector<float> v(n);
        for (auto& x : v) x = (float)nd(g);
        return v;
    }
    std::vector<int> labels(int m, int c) {
        std::uniform_int_distribution<int> u(0, c - 1);
        std::vector<int> v(m);
        for (auto& x : v) x = u(g);
        return v;
    }
};

static int cdiv(long a, long b) { return (int)((a + b - 1) / b); }

static double rel_l2(const std::vector<float>& got, const std::vector<double>& want) {
    double num = 0, den = 0;
    for (size_t i = 0; i < want.size(); ++i) {
        if (!std::isfinite(got[i])) return INFINITY;
        num += (got[i] - want[i]) * (got[i] - want[i]);
        den += want[i] * want[i];
    }
    return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

static void report(const std::string& what, double err, double tol) {
    const bool ok = err <= tol;
    if (!ok) ++failures;
    std::printf("  %-62s rel err %.2e %s\n", what.c_str(), err, ok ? "ok" : "FAIL");
}

// logits Z = XW + b in double, row-major [m, c]
static std::vector<double> logits(const std::vector<float>& X, const std::vector<float>& W,
                                  const std::vector<float>& b, int m, int d, int c) {
    std::vector<double> Z((size_t)m * c);
    for (int i = 0; i < m; ++i)
        for (int j = 0; j < c; ++j) {
            double s = b[j];
            for (int k = 0; k < d; ++k) s += (double)X[(size_t)i * d + k] * W[(size_t)k * c + j];
            Z[(size_t)i * c + j] = s;
        }
    return Z;
}

static std::vector<double> row_lse(const std::vector<double>& Z, int m, int c) {
    std::vector<double> lse(m);
    for (int i = 0; i < m; ++i) {
        double mx = -INFINITY, s = 0;
        for (int j = 0; j < c; ++j) mx = std::max(mx, Z[(size_t)i * c + j]);
        for (int j = 0; j < c; ++j) s += std::exp(Z[(size_t)i * c + j] - mx);
        lse[i] = mx + std::log(s);
    }
    return lse;
}

// ---------------------------------------------------------------------------------------------
// day 15 v4: loss and lse (fa2_v4_gemm_stats), and logp (fa2_v4_gemm_logits + subtract)
// ---------------------------------------------------------------------------------------------
static void day15(int m, int d, int c, int grid_cap, bool with_logp) {
    Data rng(1000003ull * m + 1009ull * d + c);
    auto X = rng.normal((size_t)m * d, 1.0), W = rng.normal((size_t)d * c, 2.0 / std::sqrt(d));
    auto b = rng.normal(c, 0.5);
    auto y = rng.labels(m, c);
    auto Z = logits(X, W, b, m, d, c);
    auto lse = row_lse(Z, m, c);
    double loss = 0;
    for (int i = 0; i < m; ++i) loss += lse[i] - Z[(size_t)i * c + y[i]];
    loss /= m;

    const int T = cdiv(c, 128), units = cdiv(m, 128) * T;
    const int grid = grid_cap > 0 ? std::min(units, grid_cap) : units;
    const float nan = NAN;
    std::vector<float2> stats((size_t)m * T, float2{nan, nan});
    std::vector<float> zlab(m, nan), lse_g(m, nan), row_loss(m, nan), loss_g(1, nan);
    std::vector<float> logp(with_logp ? (size_t)m * c : 0, nan);
    emu_launch({(unsigned)grid}, {256}, [&] {
        if (with_logp)
            d15::fa2_v4_gemm_logits(X.data(), W.data(), b.data(), y.data(), stats.data(), zlab.data(),
                                    logp.data(), m, d, c);
        else
            d15::fa2_v4_gemm_stats(X.data(), W.data(), b.data(), y.data(), stats.data(), zlab.data(),
                                   m, d, c);
    });
    emu_launch({(unsigned)cdiv(m, 8)}, {256},
               [&] { d15::fa2_v4_lse(stats.data(), zlab.data(), lse_g.data(), row_loss.data(), m, T); });
    emu_launch({1}, {1024}, [&] { d15::fa2_v4_loss(row_loss.data(), loss_g.data(), m); });
    char what[160];
    std::snprintf(what, sizeof what, "d15 v4 %dx%dx%d grid %d%s: loss", m, d, c, grid,
                  with_logp ? " (logp)" : "");
    report(what, std::fabs(loss_g[0] - loss) / std::max(1e-30, std::fabs(loss)), 1e-5);
    report("  lse", rel_l2(lse_g, lse), 1e-5);
    if (with_logp) {
        emu_launch({(unsigned)m}, {256}, [&] { d15::fa2_v4_subtract(logp.data(), lse_g.data(), m, c); });
        std::vector<double> want(Z.size());
        for (int i = 0; i < m; ++i)
            for (int j = 0; j < c; ++j) want[(size_t)i * c + j] = Z[(size_t)i * c + j] - lse[i];
        report("  logp", rel_l2(logp, want), 1e-5);
    }
}

#ifdef WITH_DAY20
#include "day15_20_emu_test20.inc"
#endif

int main(int argc, char** argv) {
    const std::string only = argc > 1 ? argv[1] : "";
    if (only.empty() || only == "15") {
        std::printf("day 15 (FA2_WARPS_M=%d, FA2_BK=%d)\n", d15::v4::WM, d15::v4::BK);
        // single tiles, every edge of the 128 x 128 x BK tile, K below and above BK
        const int sizes[][3] = {{1, 1, 1},   {5, 1, 3},     {7, 33, 10},   {128, 8, 128},
                                {129, 9, 129}, {127, 16, 127}, {130, 17, 257}, {33, 300, 1000}};
        for (auto& s : sizes) day15(s[0], s[1], s[2], 0, false);
        for (auto& s : sizes) day15(s[0], s[1], s[2], 0, true);
        // persistent grids: a few blocks walk many tiles (K of one step, and of several)
        day15(257, 5, 1000, 3, false);
        day15(257, 5, 1000, 3, true);
        day15(300, 20, 1300, 7, false);
        day15(300, 20, 1300, 2, true);
        day15(129, 40, 385, 1, true);
    }
#ifdef WITH_DAY20
    if (only.empty() || only == "20") run_day20();
#endif
    std::printf(failures ? "%d FAILED\n" : "all ok\n", failures);
    return failures ? 1 : 0;
}
