// Day 35 on the host emulator (.notes/day35_emu.h, no GPU): v1, v2 and every v3 / v4 entry
// point of kernel.cu (all configurations whose registers hold the row) against a float64
// LayerNorm backward, at ragged sizes, with two emulated "GPU sizes" (so the grid, the groups, the
// reducers and the tiles take several shapes). Outputs and partial rows are poisoned with NaN;
// v4 runs twice on the same counters and must give the same dgamma/dbeta bits (and leave the
// counters at zero). Built and run by .notes/day35_emulate.py.
#include "day35_emu.h"

#include <cstdio>
#include <random>
#include <string>

inline float __expf(float x) { return std::exp(x); }

#include KERNEL_SRC

typedef void (*MainFn)(const float*, const float*, const float*, const float*, const float*, float*,
                       float*, float*, float*, float*, unsigned*, int, int, int, int);
struct Cfg {
    int w, items, threads;
    const char* acc;
    MainFn v3, v4;
};
#include TABLE_SRC  // static Cfg CFGS[] = {...};

static int failures = 0, checks = 0;

static int cdiv(int a, int b) { return (a + b - 1) / b; }
static int gcd(int a, int b) { return b ? gcd(b, a % b) : a; }

// driver.py's grid_blocks / tile_width
static int grid_blocks(int n, int groups, int resident) {
    const int q = 4 / gcd(groups, 4);
    const int g = std::min(resident, cdiv(n, groups));
    return std::max(q, g / q * q);
}
static int tile_width(int c, int target) {
    for (int tw : {32, 16, 8})
        if (cdiv(c, tw) >= target) return tw;
    return 8;
}

struct Case {
    int n, c;
    std::vector<float> x, dy, gamma, mean, rstd;
    std::vector<double> dx, dg, db;
};

static Case make_case(int n, int c, unsigned seed) {
    Case k{n, c};
    std::mt19937 rng(seed);
    std::normal_distribution<double> z(0.0, 1.0);
    const double offset[6] = {1e4, 0.0, 3e3, 100.0, 2500.25, 0.0};
    const double spread[6] = {1.0, 1.0, 0.5, 10.0, 0.0, 1e-3};
    k.x.resize((size_t)n * c);
    k.dy.resize((size_t)n * c);
    k.gamma.resize(c);
    for (int r = 0; r < n; ++r)
        for (int j = 0; j < c; ++j) k.x[(size_t)r * c + j] = (float)(offset[r % 6] + spread[r % 6] * z(rng));
    for (auto& v : k.dy) v = (float)z(rng);
    for (auto& v : k.gamma) v = (float)(1.0 + 0.1 * z(rng));
    k.mean.resize(n);
    k.rstd.resize(n);
    for (int r = 0; r < n; ++r) {
        double m = 0, v = 0;
        for (int j = 0; j < c; ++j) m += k.x[(size_t)r * c + j];
        m /= c;
        for (int j = 0; j < c; ++j) v += (k.x[(size_t)r * c + j] - m) * (k.x[(size_t)r * c + j] - m);
        v /= c;
        k.mean[r] = (float)m;
        k.rstd[r] = (float)(1.0 / std::sqrt(v + 1e-5));
    }
    k.dx.assign((size_t)n * c, 0.0);
    k.dg.assign(c, 0.0);
    k.db.assign(c, 0.0);
    for (int r = 0; r < n; ++r) {
        const double m = k.mean[r], rs = k.rstd[r];
        double s1 = 0, s2 = 0;
        for (int j = 0; j < c; ++j) {
            const size_t i = (size_t)r * c + j;
            const double xh = (k.x[i] - m) * rs, g = (double)k.dy[i] * k.gamma[j];
            s1 += g;
            s2 += g * xh;
            k.dg[j] += k.dy[i] * xh;
            k.db[j] += k.dy[i];
        }
        s1 /= c;
        s2 /= c;
        for (int j = 0; j < c; ++j) {
            const size_t i = (size_t)r * c + j;
            const double xh = (k.x[i] - m) * rs, g = (double)k.dy[i] * k.gamma[j];
            k.dx[i] = rs * (g - s1 - xh * s2);
        }
    }
    return k;
}

static bool close(const char* what, const std::vector<float>& got, const std::vector<double>& want,
                  std::string& msg) {
    double num = 0, den = 0, worst = 0, scale = 0;
    for (size_t i = 0; i < want.size(); ++i) {
        if (!std::isfinite(got[i])) {
            msg = std::string(what) + ": NaN/Inf at " + std::to_string(i);
            return false;
        }
        const double d = got[i] - want[i];
        num += d * d;
        den += want[i] * want[i];
        worst = std::max(worst, std::fabs(d));
        scale = std::max(scale, std::fabs(want[i]));
    }
    const double rel = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
    if (rel > 1e-5 || worst > 1e-4 * (scale > 0 ? scale : 1.0)) {
        char b[200];
        snprintf(b, sizeof b, "%s: rel-L2 %.3g, max abs %.3g", what, rel, worst);
        msg = b;
        return false;
    }
    return true;
}

struct Out {
    std::vector<float> dx, dg, db;
};

static const float NaN = std::nanf("");

static void report(const Case& k, const std::string& name, const Out& o) {
    std::string msg;
    ++checks;
    if (close("dx", o.dx, k.dx, msg) && close("dgamma", o.dg, k.dg, msg) && close("dbeta", o.db, k.db, msg)) return;
    ++failures;
    printf("FAIL %s at %dx%d: %s\n", name.c_str(), k.n, k.c, msg.c_str());
}

static Out fresh(const Case& k) { return {std::vector<float>((size_t)k.n * k.c, NaN), std::vector<float>(k.c, NaN), std::vector<float>(k.c, NaN)}; }

static void run_reduce(const float* pg, const float* pb, int p, int ld, int c, int tw, Out& o) {
    emu_launch({(unsigned)cdiv(c, tw)}, {256}, 1, [&] { lnbwd_v2_reduce(pg, pb, p, ld, c, tw, o.dg.data(), o.db.data()); });
}

static void check_case(int n, int c, unsigned seed) {
    Case k = make_case(n, c, seed);
    if (c <= 64) {  // v1 (its column kernel is 1024 threads x cdiv(C, 32) blocks: slow here)
        Out o = fresh(k);
        emu_launch({(unsigned)cdiv(n, 8)}, {256}, 1, [&] {
            lnbwd_v1_dx(k.x.data(), k.dy.data(), k.gamma.data(), k.mean.data(), k.rstd.data(), o.dx.data(), n, c);
        });
        emu_launch({(unsigned)cdiv(c, 32)}, {1024}, 1, [&] {
            lnbwd_v1_dgamma(k.x.data(), k.dy.data(), k.mean.data(), k.rstd.data(), o.dg.data(), o.db.data(), n, c);
        });
        report(k, "v1", o);
    }
    {  // v2
        Out o = fresh(k);
        const int p = cdiv(n, 8);
        std::vector<float> pg((size_t)p * c, NaN), pb((size_t)p * c, NaN);
        emu_launch({(unsigned)p}, {256}, 4, [&] {
            lnbwd_v2_rows(k.x.data(), k.dy.data(), k.gamma.data(), k.mean.data(), k.rstd.data(), o.dx.data(),
                          pg.data(), pb.data(), n, c);
        });
        run_reduce(pg.data(), pb.data(), p, c, c, tile_width(c, 5), o);
        report(k, "v2", o);
    }
    for (const Cfg& f : CFGS) {
        const int need = c / 4, cap = 32 * f.w * f.items;
        if (cap < need) continue;                       // the row's body does not fit this config
        if (cap > std::max(256, 2 * need)) continue;    // far too wide: idle threads, nothing new
        const int groups = f.threads / (32 * f.w);
        const int cp = cdiv(c, 4) * 4;
        for (int sms : {4, 7}) {
            const int blocks = grid_blocks(n, groups, sms);
            std::string name = "w" + std::to_string(f.w) + "_i" + std::to_string(f.items) + "_b" +
                               std::to_string(f.threads) + "_" + f.acc + " sms=" + std::to_string(sms) +
                               " blocks=" + std::to_string(blocks);
            for (int ver = 3; ver <= 4; ++ver) {
                const int tw = ver == 3 ? tile_width(c, sms) : tile_width(c, std::min(blocks, sms));
                const int reducers = std::min({cdiv(c, tw), blocks, sms});
                std::vector<float> pg((size_t)blocks * cp, NaN), pb((size_t)blocks * cp, NaN);
                unsigned counters[2] = {0, 0};
                std::vector<float> bits;
                for (int rep = 0; rep < (ver == 4 ? 2 : 1); ++rep) {
                    Out o = fresh(k);
                    MainFn fn = ver == 3 ? f.v3 : f.v4;
                    emu_launch({(unsigned)blocks}, {(unsigned)f.threads}, blocks, [&] {
                        fn(k.x.data(), k.dy.data(), k.gamma.data(), k.mean.data(), k.rstd.data(), o.dx.data(),
                           pg.data(), pb.data(), o.dg.data(), o.db.data(), counters, n, c, tw, reducers);
                    });
                    if (ver == 3) run_reduce(pg.data(), pb.data(), blocks, cp, c, tw, o);
                    const std::string vn = std::string(ver == 3 ? "v3 " : "v4 ") + name +
                                           " tw=" + std::to_string(tw) + " reducers=" + std::to_string(reducers);
                    report(k, vn, o);
                    if (ver == 4 && (counters[0] || counters[1])) {
                        ++failures;
                        printf("FAIL %s at %dx%d: counters left at %u, %u\n", vn.c_str(), n, c, counters[0], counters[1]);
                    }
                    std::vector<float> now(o.dg);
                    now.insert(now.end(), o.db.begin(), o.db.end());
                    if (rep == 1 && std::memcmp(now.data(), bits.data(), now.size() * 4) != 0) {
                        ++failures;
                        printf("FAIL %s at %dx%d: second run's dgamma/dbeta bits differ\n", vn.c_str(), n, c);
                    }
                    bits = now;
                }
            }
        }
    }
    printf("  %dx%d done (%d checks so far, %d failures)\n", n, c, checks, failures);
    fflush(stdout);
}

int main(int argc, char** argv) {
    const int sizes[][2] = {{1, 1},     {7, 2},     {9, 3},    {33, 31},  {17, 768},  {13, 1023},
                            {3, 3073},  {5, 4097},  {100, 3},  {203, 768}, {150, 1023}, {22, 2050},
                            {37, 4097}, {2, 8195}};
    unsigned seed = 35;
    for (auto& s : sizes) check_case(s[0], s[1], seed++);
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
