// Day 29: every kernel of kernel.cu except the cp.async "fast" v3 candidate, run on the CPU
// through .notes/day15_20_emu.h (each block as std::threads) on integer inputs and compared
// exactly with a float64 product; outputs poisoned with NaN, with a guard past the end.
// k.inc is kernel.cu with `extern __shared__ float4 smem4[];` replaced by
// `float4* smem4 = emu_dyn_smem;` and the bmm_sgemm_v3_fast block cut out. Build and run:
//   g++ -std=c++20 -O1 -pthread -I common/cuda -include cmath -o /tmp/emu .notes/day29_emu.cpp
#include "/work/main/.notes/day15_20_emu.h"
inline unsigned long long __cvta_generic_to_shared(const void* p) { return (unsigned long long)p; }
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
alignas(16) static float4 emu_dyn_smem[256 * 1024 / 16];
#include "k.inc"

static int fails = 0;
typedef void (*Tiny)(const float*, const float*, float*, int, int, int, int, int);
typedef void (*Tile)(const float*, const float*, float*, int, int, int);

struct Prob {
    int batch, M, K, N;
    std::vector<float> a, b, c;
    std::vector<double> ref;
    Prob(int bt, int m, int k, int n) : batch(bt), M(m), K(k), N(n) {
        std::mt19937 g(bt * 7 + m * 3 + k + n);
        std::uniform_int_distribution<int> d(-8, 8);
        a.resize((size_t)bt * m * k); b.resize((size_t)bt * k * n);
        for (auto& x : a) x = d(g);
        for (auto& x : b) x = d(g);
        ref.assign((size_t)bt * m * n, 0.0);
        for (int q = 0; q < bt; ++q) for (int i = 0; i < m; ++i) for (int j = 0; j < n; ++j) {
            double s = 0; for (int t = 0; t < k; ++t) s += (double)a[(size_t)q*m*k + i*k + t] * b[(size_t)q*k*n + t*n + j];
            ref[(size_t)q*m*n + i*n + j] = s; }
    }
    void poison() { c.assign((size_t)batch * M * N + 16, NAN); }
    void check(const char* what) {
        for (size_t i = 0; i < ref.size(); ++i) if (!(c[i] == (float)ref[i])) {
            printf("FAIL %s %dx%dx%dx%d at %zu: %f vs %f\n", what, batch, M, K, N, i, c[i], ref[i]); ++fails; return; }
        for (size_t i = ref.size(); i < c.size(); ++i) if (!std::isnan(c[i])) { printf("FAIL %s wrote past the end\n", what); ++fails; return; }
    }
};

static int cdiv(int a, int b) { return (a + b - 1) / b; }

int main() {
    int shapes[][4] = {{1,1,1,1},{3,1,17,1},{3,17,1,33},{2,33,17,65},{5,16,16,16},{7,8,8,8},{4,20,12,36},
                       {2,130,65,33},{2,65,130,64},{2,64,64,64},{1,130,132,260},{2,257,33,129},{300,2,3,4},{40,1,1,1},{3,32,96,32},{2,100,1,100},{3,48,40,48}};
    for (auto& s : shapes) {
        Prob p(s[0], s[1], s[2], s[3]);
        int batch = s[0], M = s[1], K = s[2], N = s[3];
        // v1 with a small grid.z to exercise the batch loop
        p.poison();
        emu_launch({(unsigned)cdiv(N,16),(unsigned)cdiv(M,16),(unsigned)std::min(batch,2)}, {16,16,1}, [&]{ bmm_naive_v1(p.a.data(), p.b.data(), p.c.data(), batch, M, N, K); });
        p.check("v1");
        // tiny (if it fits), G from a 2 KB and a 32 KB target
        if (M*K + K*N <= 12288) for (int target : {2048, 32768}) {
            int per = M*K + K*N; int G = std::max(1, std::min(batch, target / (4*per)));
            Tiny f = N % 4 == 0 ? (K % 4 == 0 ? bmm_tiny_v2_n4_k4 : bmm_tiny_v2_n4) : (K % 4 == 0 ? bmm_tiny_v2_k4 : bmm_tiny_v2_any);
            p.poison();
            emu_launch({(unsigned)cdiv(batch,G),1,1}, {256,1,1}, [&]{ f(p.a.data(), p.b.data(), p.c.data(), batch, M, N, K, G); });
            p.check(("tiny G=" + std::to_string(G)).c_str());
        }
        bool vec = K % 4 == 0 && N % 4 == 0;
        struct T { int bm, bn; Tile v, s; const char* name; } tiles[] = {
            {128,128,bmm_sgemm_v3_vec,bmm_sgemm_v3_scalar,"v3"},
            {64,64,bmm_tile_v4_64x64_k8_vec,bmm_tile_v4_64x64_k8_scalar,"64x64k8"},
            {64,64,bmm_tile_v4_64x64_k4_vec,bmm_tile_v4_64x64_k4_scalar,"64x64k4"},
            {32,64,bmm_tile_v4_32x64_k4_vec,bmm_tile_v4_32x64_k4_scalar,"32x64k4"},
            {64,128,bmm_tile_v4_64x128_k8_vec,bmm_tile_v4_64x128_k8_scalar,"64x128k8"},
            {128,64,bmm_tile_v4_128x64_k8_vec,bmm_tile_v4_128x64_k8_scalar,"128x64k8"}};
        if (batch > 8) continue;  // slow: 256-thread blocks per tile
        for (auto& t : tiles) {
            Tile f = vec ? t.v : t.s;
            p.poison();
            emu_launch({(unsigned)cdiv(N,t.bn),(unsigned)cdiv(M,t.bm),(unsigned)batch}, {(unsigned)(t.bm*t.bn/64),1,1}, [&]{ f(p.a.data(), p.b.data(), p.c.data(), M, N, K); });
            p.check(t.name);
        }
        printf("ok-ish %dx%dx%dx%d\n", batch, M, K, N); fflush(stdout);
    }
    printf("fails: %d\n", fails);
    return fails != 0;
}
