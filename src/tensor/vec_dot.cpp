// Which activation format and which kernels each weight type uses. The pairing follows
// llama.cpp (our logits are checked against it): Q4_0/Q5_0/Q8_0 x Q8_0, Q4_1/Q5_1 x Q8_1,
// K-quants x Q8_K, F16 x F16, BF16 x BF16, F32 x F32.
#include "tensor/vec_dot.h"

#include <array>
#include <cstdio>
#include <cstdlib>
#include <iterator>

#include "common/error.h"
#include "tensor/act_quant.h"
#include "tensor/cpu_features.h"

namespace specdec {
namespace {

struct Tables {
  // Indexed by path (Isa), then by the raw GgmlType id; missing entries have dot == nullptr.
  std::array<std::array<DotKernel, 31>, std::size(kAllIsas)> by_type;
};

// A row count from the environment variable `name` (N >= 1), or 0 when it is unset; another
// value is ignored with a warning.
int64_t rows_from_env(const char* name) {
  const char* env = std::getenv(name);
  if (env == nullptr || *env == '\0') return 0;
  char* end = nullptr;
  const long v = std::strtol(env, &end, 10);
  if (*end == '\0' && v >= 1) return v;
  std::fprintf(stderr, "specdec: ignoring %s=%s (expected a row count >= 1)\n", name, env);
  return 0;
}

// From how many activation rows the AMX tile kernels run: Q4_K/Q5_K from 32 (the weights'
// folding is paid once per call: on the 1.5B a pass of 24-28 rows cost the same on tiles as on
// VNNI, from 40 rows the tiles were 8-15 % faster), Q6_K not at all (its five weight copies made
// it slower on the 1.5B's FFN down projection; docs/benchmarks.md).
// SPECDEC_AMX_MIN_ROWS=N sets Q4_K's and Q5_K's, SPECDEC_AMX_MIN_ROWS_Q6=N Q6_K's, for measuring.
int64_t tile_min_rows(GgmlType t) {
  static const int64_t forced45 = rows_from_env("SPECDEC_AMX_MIN_ROWS");
  static const int64_t forced6 = rows_from_env("SPECDEC_AMX_MIN_ROWS_Q6");
  if (t == GgmlType::Q6_K) return forced6 > 0 ? forced6 : int64_t{1} << 30;
  return forced45 > 0 ? forced45 : 32;
}

// The kernels of one path. Only called for paths this CPU supports: the tables of a path
// are built in its own instruction-set file and may run its instructions.
void fill_path(Isa isa, std::array<DotKernel, 31>& by) {
  const bool simd = isa != Isa::kScalar;  // the AVX-512 path quantizes activations as AVX2 does
  const DotKernelTable& k = isa == Isa::kAvx512Vnni ? dot_kernels_avx512vnni()
                            : simd                  ? dot_kernels_avx2()
                                                    : dot_kernels_scalar();
  const ActQuantFn q8_0 = simd ? quantize_act_q8_0_avx2 : quantize_act_q8_0_scalar;
  const ActQuantFn q8_1 = simd ? quantize_act_q8_1_avx2 : quantize_act_q8_1_scalar;
  const ActQuantFn q8_k = simd ? quantize_act_q8_k_avx2 : quantize_act_q8_k_scalar;
  const ActQuantFn f16 = simd ? quantize_act_f16_avx2 : quantize_act_f16_scalar;
  auto set = [&](GgmlType w, GgmlType a, ActQuantFn q, DotFn d) {
    by[static_cast<size_t>(w)] = DotKernel{a, q, d};
  };
  set(GgmlType::F32, GgmlType::F32, nullptr, k.f32);
  set(GgmlType::F16, GgmlType::F16, f16, k.f16);
  set(GgmlType::BF16, GgmlType::BF16, quantize_act_bf16_scalar, k.bf16);
  set(GgmlType::Q4_0, GgmlType::Q8_0, q8_0, k.q4_0);
  set(GgmlType::Q5_0, GgmlType::Q8_0, q8_0, k.q5_0);
  set(GgmlType::Q8_0, GgmlType::Q8_0, q8_0, k.q8_0);
  set(GgmlType::Q4_1, GgmlType::Q8_1, q8_1, k.q4_1);
  set(GgmlType::Q5_1, GgmlType::Q8_1, q8_1, k.q5_1);
  if (simd) {
    const DotRowsKernelTable& r =
        isa == Isa::kAvx512Vnni ? dot_rows_kernels_avx512vnni() : dot_rows_kernels_avx2();
    by[static_cast<size_t>(GgmlType::Q4_0)].dot_rows = r.q4_0;
    by[static_cast<size_t>(GgmlType::Q4_1)].dot_rows = r.q4_1;
    by[static_cast<size_t>(GgmlType::Q5_0)].dot_rows = r.q5_0;
    by[static_cast<size_t>(GgmlType::Q5_1)].dot_rows = r.q5_1;
    by[static_cast<size_t>(GgmlType::Q8_0)].dot_rows = r.q8_0;
  }
  const PackedKernelTable& pk = isa == Isa::kAvx512Vnni ? packed_kernels_avx512vnni()
                                : simd                  ? packed_kernels_avx2()
                                                        : packed_kernels_scalar();
  by[static_cast<size_t>(GgmlType::Q4_0)].packed = pk.q4_0;
  by[static_cast<size_t>(GgmlType::Q4_1)].packed = pk.q4_1;
  by[static_cast<size_t>(GgmlType::Q5_0)].packed = pk.q5_0;
  by[static_cast<size_t>(GgmlType::Q8_0)].packed = pk.q8_0;
  if (isa == Isa::kAvx512Vnni) {
    const PackedKernelTable& p16 = packed16_kernels_avx512vnni();
    by[static_cast<size_t>(GgmlType::Q4_0)].packed16 = p16.q4_0;
    by[static_cast<size_t>(GgmlType::Q4_1)].packed16 = p16.q4_1;
    by[static_cast<size_t>(GgmlType::Q5_0)].packed16 = p16.q5_0;
    by[static_cast<size_t>(GgmlType::Q8_0)].packed16 = p16.q8_0;
    // On the 2-core Intel Xeon (Emerald Rapids) VM the pair kernels were ahead from 2 rows on
    // where it counts (bench_tensor MatmulChain, two threads, 300 MB of the Qwen2.5-Coder 0.5B
    // draft's FFN shapes 4864 x 896 and 896 x 4864, the two forms alternated twice, medians):
    // 2-5 rows 0.77-0.92 of the 8-row kernels' time (Q5_0 4864 x 896 at 2 rows even), 8 rows
    // 0.68-0.85, 9 rows 0.50-0.65; one thread on one 4864 x 896 matrix, 8 rows: Q4_0 315 -> 190 us,
    // Q5_0 333 -> 208, Q8_0 311 -> 202. The draft's prefill of a 559-token prompt went from 402
    // to 518 tokens/s (5 alternations, medians). Not measured on AMD, where the K-quants' pair
    // kernels paid only from more rows: there they start at Q4_K's 4.
    const int64_t min_rows = cpu_is_intel() ? 2 : 4;
    for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q8_0}) {
      by[static_cast<size_t>(t)].packed16_min_rows = min_rows;
    }
  }
  set(GgmlType::Q4_K, GgmlType::Q8_K, q8_k, k.q4_k);
  set(GgmlType::Q5_K, GgmlType::Q8_K, q8_k, k.q5_k);
  set(GgmlType::Q6_K, GgmlType::Q8_K, q8_k, k.q6_k);
  const PackedKKernelTable& pkk = isa == Isa::kAvx512Vnni ? packed_k_kernels_avx512vnni()
                                  : simd                  ? packed_k_kernels_avx2()
                                                          : packed_k_kernels_scalar();
  by[static_cast<size_t>(GgmlType::Q4_K)].packed = pkk.q4_k;
  by[static_cast<size_t>(GgmlType::Q5_K)].packed = pkk.q5_k;
  by[static_cast<size_t>(GgmlType::Q6_K)].packed = pkk.q6_k;
  if (isa == Isa::kAvx512Vnni) {
    const PackedKKernelTable& p16 = packed_k16_kernels_avx512vnni();
    by[static_cast<size_t>(GgmlType::Q4_K)].packed16 = p16.q4_k;
    by[static_cast<size_t>(GgmlType::Q5_K)].packed16 = p16.q5_k;
    by[static_cast<size_t>(GgmlType::Q6_K)].packed16 = p16.q6_k;
    // From how many activation rows the pair kernels beat the 8-row ones where it counts: two
    // threads streaming weights that are not in any cache, as a verify pass does
    // (bench_tensor MatmulChain, 300 MB of 65536 x 1536 matrices, the two forms alternated
    // over 3-5 processes, medians). The pair kernels read two streams at once and keep up
    // with memory less well, which the multiply-adds they save pay for only at more rows:
    // Q4_K 2 rows 9.9 against 7.4 ms, 3: 10.5 / 8.7, 4-5 even, 6: 11.5 / 12.4, 9: 15.2 / 16.8;
    // Q5_K 6 rows 11.8 / 9.8, 7: 10.8 / 12.8; Q6_K 2-9 rows 9.1-14.2 / 6.6-12.9, 16: 16.2 /
    // 23.1. (One thread on one matrix partly in the last-level cache had put them at 2-3.)
    // On the Qwen2.5-Coder 1.5B Q4_K_M this took a verify pass over 5 tokens from 1.37-1.51 to
    // 1.30-1.31 decode steps and over 9 from 1.85-1.97 to 1.73-1.82 (docs/benchmarks.md).
    // Those numbers are an AMD EPYC Zen 4 VM's. On a 2-core Intel Xeon (Emerald Rapids) VM the
    // pair kernels paid from fewer rows (why was not traced). Verify passes of the
    // Qwen2.5-Coder 1.5B, pair thresholds Q4_K 3 against 4 (4 alternations, medians): 3 tokens
    // 1.16 against 1.27 decode steps, 2 tokens even with 2; Q6_K 6 against 10: 6 tokens 1.38 /
    // 1.43, 7: 1.47 / 1.53, 9: 1.77 / 1.88 (docs/benchmarks.md). Only speed depends on the
    // thresholds, never a bit of the output.
    const bool intel = cpu_is_intel();
    by[static_cast<size_t>(GgmlType::Q4_K)].packed16_min_rows = intel ? 3 : 4;
    by[static_cast<size_t>(GgmlType::Q5_K)].packed16_min_rows = 7;
    by[static_cast<size_t>(GgmlType::Q6_K)].packed16_min_rows = intel ? 6 : 10;
    if (cpu_has_amx_int8()) {
      const TileKKernelTable& tiles = packed_k_tile_kernels_amx();
      by[static_cast<size_t>(GgmlType::Q4_K)].packed_tiles = tiles.q4_k;
      by[static_cast<size_t>(GgmlType::Q5_K)].packed_tiles = tiles.q5_k;
      by[static_cast<size_t>(GgmlType::Q6_K)].packed_tiles = tiles.q6_k;
      for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K}) {
        by[static_cast<size_t>(t)].packed_tiles_min_rows = tile_min_rows(t);
      }
    }
  }
}

Tables build_tables() {
  Tables t{};
  for (Isa isa : kAllIsas) {
    if (cpu_supports(isa)) fill_path(isa, t.by_type[static_cast<size_t>(isa)]);
  }
  return t;
}

}  // namespace

const DotKernel& dot_kernel(GgmlType weight, Isa isa) {
  static const Tables tables = build_tables();
  // A path this CPU cannot run falls back to the best one it can (its table is empty).
  const auto path = static_cast<size_t>(best_supported(isa));
  const auto id = static_cast<size_t>(weight);
  if (id >= tables.by_type[path].size() || tables.by_type[path][id].dot == nullptr) {
    fail("matmul: unsupported weight type ", type_name(weight));
  }
  return tables.by_type[path][id];
}

}  // namespace specdec
