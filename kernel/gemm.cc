#include "gemm.h"

#include <algorithm>
#include <type_traits>
#include <vector>

#include "status.h"

namespace omr {

namespace {

// Multiply-adds per task when a product is split over the intra-op threads (MLAS's grain for a
// thread), so that a small product stays on the calling thread.
constexpr int64_t kChunkWork = int64_t{1} << 16;

template <class C>
constexpr ONNXTensorElementDataType kElementType =
    std::is_same_v<C, float> ? ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT
                             : ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE;

// Gemm-13 with transB = 1, for `inputs` inputs (2: no bias, 3: bias as C); nullptr if the
// runtime has no such kernel.
template <class C>
OrtOp* CreateGemm(const OrtKernelInfo* info, int inputs) {
  // A kernel made by CreateOp sees only the attributes given here: every one Gemm reads.
  const int64_t zero = 0, one = 1;
  const float unit = 1.0f;
  OrtOpAttr* attrs[4] = {nullptr, nullptr, nullptr, nullptr};
  OrtStatus* status = ORT_CALL(CreateOpAttr, "transA", &zero, 1, ORT_OP_ATTR_INT, &attrs[0]);
  if (status == nullptr)
    status = ORT_CALL(CreateOpAttr, "transB", &one, 1, ORT_OP_ATTR_INT, &attrs[1]);
  if (status == nullptr)
    status = ORT_CALL(CreateOpAttr, "alpha", &unit, 1, ORT_OP_ATTR_FLOAT, &attrs[2]);
  if (status == nullptr)
    status = ORT_CALL(CreateOpAttr, "beta", &unit, 1, ORT_OP_ATTR_FLOAT, &attrs[3]);
  OrtOp* op = nullptr;
  if (status == nullptr) {
    const char* type_names[] = {"T"};
    ONNXTensorElementDataType type_values[] = {kElementType<C>};
    status = ORT_CALL(CreateOp, info, "Gemm", "", 13, type_names, type_values, 1, attrs, 4, inputs,
                      1, &op);
  }
  for (OrtOpAttr* attr : attrs) {
    if (attr != nullptr) ORT_CALL(ReleaseOpAttr, attr);
  }
  if (status != nullptr) {  // no Gemm kernel for this type: the plain loop serves
    ORT_CALL(ReleaseStatus, status);
    return nullptr;
  }
  return op;
}

}  // namespace

template <class C>
Gemm<C>::Gemm(const OrtKernelInfo* info) {
  with_bias_ = CreateGemm<C>(info, 3);
  without_bias_ = with_bias_ != nullptr ? CreateGemm<C>(info, 2) : nullptr;
  if (without_bias_ == nullptr && with_bias_ != nullptr) {
    ORT_CALL(ReleaseOp, with_bias_);
    with_bias_ = nullptr;
  }
  if (with_bias_ != nullptr) {
    Check(ORT_CALL(CreateCpuMemoryInfo, OrtArenaAllocator, OrtMemTypeDefault, &memory_));
  }
}

template <class C>
Gemm<C>::~Gemm() {
  if (with_bias_ != nullptr) ORT_CALL(ReleaseOp, with_bias_);
  if (without_bias_ != nullptr) ORT_CALL(ReleaseOp, without_bias_);
  if (memory_ != nullptr) ORT_CALL(ReleaseMemoryInfo, memory_);
}

template <class C>
void Gemm<C>::RunTransposed(const C* a, int64_t m, int64_t k, const C* bt, int64_t n, const C* bias,
                            C* out) {
  for (int64_t i = 0; i < m; ++i) {
    C* row = out + i * n;
    for (int64_t j = 0; j < n; ++j) row[j] = 0;
    const C* ai = a + i * k;
    for (int64_t p = 0; p < k; ++p) {
      const C v = ai[p];
      const C* bp = bt + p * n;
      for (int64_t j = 0; j < n; ++j) row[j] += v * bp[j];
    }
    if (bias != nullptr) {
      for (int64_t j = 0; j < n; ++j) row[j] += bias[j];
    }
  }
}

template <class C>
void Gemm<C>::Run(const OrtKernelContext* context, const C* a, int64_t m, int64_t k, const C* b,
                  int64_t n, const C* bias, C* out) const {
  if (m == 0 || n == 0) return;
  if (k == 0 || with_bias_ == nullptr) {
    std::vector<C> bt(static_cast<size_t>(k * n));
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t p = 0; p < k; ++p) bt[p * n + j] = b[j * k + p];
    }
    RunTransposed(a, m, k, bt.data(), n, bias, out);
    return;
  }
  const ONNXTensorElementDataType type = kElementType<C>;
  const int64_t a_shape[] = {m, k};
  const int64_t b_shape[] = {n, k};
  const int64_t c_shape[] = {n};
  const int64_t out_shape[] = {m, n};
  OrtValue* values[4] = {nullptr, nullptr, nullptr, nullptr};
  auto wrap = [&](int slot, const C* data, const int64_t* shape, size_t rank, int64_t count) {
    Check(ORT_CALL(CreateTensorWithDataAsOrtValue, memory_, const_cast<C*>(data),
                   static_cast<size_t>(count) * sizeof(C), shape, rank, type, &values[slot]));
  };
  struct Release {
    OrtValue** values;
    ~Release() {
      for (int i = 0; i < 4; ++i) {
        if (values[i] != nullptr) ORT_CALL(ReleaseValue, values[i]);
      }
    }
  } release{values};
  wrap(0, a, a_shape, 2, m * k);
  wrap(1, b, b_shape, 2, n * k);
  wrap(3, out, out_shape, 2, m * n);
  int inputs = 2;
  if (bias != nullptr) {
    wrap(2, bias, c_shape, 1, n);
    inputs = 3;
  }
  Check(ORT_CALL(InvokeOp, context, bias != nullptr ? with_bias_ : without_bias_, values, inputs,
                 &values[3], 1));
}

template <class C>
Gemm<C>::Repeated::Repeated(const Gemm& gemm, const C* a, int64_t max_m, int64_t k, const C* b,
                            int64_t n, C* out, const Repeated* same_b)
    : gemm_(gemm), a_(a), b_(b), k_(k), n_(n), out_(out) {
  if constexpr (std::is_same_v<C, float>) {
    // One row is a matrix-vector product, which reads each element of b once: packing would
    // only add a copy.
    if (PackedProduct::Available() && max_m == 1 && k > 0 && n > 0) {
      matvec_ = true;
      return;
    }
    if (PackedProduct::Available() && max_m > 1 && k > 0 && n > 0) {
      packed_ = same_b != nullptr && same_b->packed_ != nullptr
                    ? same_b->packed_
                    : std::make_shared<PackedProduct>(b, n, k);
      return;
    }
  }
  if (k == 0 || !gemm.uses_runtime()) {  // the plain loop, on b transposed once
    bt_.resize(static_cast<size_t>(k * n));
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t p = 0; p < k; ++p) bt_[p * n + j] = b[j * k + p];
    }
    return;
  }
  a_values_.assign(static_cast<size_t>(max_m + 1), nullptr);
  out_values_.assign(static_cast<size_t>(max_m + 1), nullptr);
  const int64_t b_shape[] = {n, k};
  Check(ORT_CALL(CreateTensorWithDataAsOrtValue, gemm.memory_, const_cast<C*>(b),
                 static_cast<size_t>(n * k) * sizeof(C), b_shape, 2, kElementType<C>, &b_value_));
}

template <class C>
Gemm<C>::Repeated::~Repeated() {
  if (b_value_ != nullptr) ORT_CALL(ReleaseValue, b_value_);
  for (auto* values : {&a_values_, &out_values_}) {
    for (OrtValue* value : *values) {
      if (value != nullptr) ORT_CALL(ReleaseValue, value);
    }
  }
}

template <class C>
void Gemm<C>::Repeated::Run(const OrtKernelContext* context, int64_t m) {
  if (m == 0 || n_ == 0) return;
  if constexpr (std::is_same_v<C, float>) {
    if (packed_ != nullptr) {
      RunPacked(context, m);
      return;
    }
    if (matvec_) {
      RunMatVec(context);
      return;
    }
  }
  if (b_value_ == nullptr) {
    RunTransposed(a_, m, k_, bt_.data(), n_, nullptr, out_);
    return;
  }
  auto view = [&](OrtValue*& value, const C* data, int64_t cols) {
    if (value != nullptr) return;
    const int64_t shape[] = {m, cols};
    Check(ORT_CALL(CreateTensorWithDataAsOrtValue, gemm_.memory_, const_cast<C*>(data),
                   static_cast<size_t>(m * cols) * sizeof(C), shape, 2, kElementType<C>, &value));
  };
  view(a_values_[m], a_, k_);
  view(out_values_[m], out_, n_);
  const OrtValue* inputs[] = {a_values_[m], b_value_};
  Check(ORT_CALL(InvokeOp, context, gemm_.without_bias_, inputs, 2, &out_values_[m], 1));
}

template <class C>
void Gemm<C>::Repeated::RunPacked(const OrtKernelContext* context, int64_t m) {
  if constexpr (std::is_same_v<C, float>) {
    // Contiguous ranges of panels of about kChunkWork multiply-adds each.
    packed_->Pack();
    const int64_t panels = packed_->panels();
    const int64_t chunks = std::clamp<int64_t>(m * n_ * k_ / kChunkWork, 1, panels);
    if (chunks == 1) {
      packed_->Run(a_, m, out_, 0, panels);
      return;
    }
    struct Job {
      const PackedProduct* packed;
      const C* a;
      int64_t m, panels, chunks;
      C* out;
    } job{packed_.get(), a_, m, panels, chunks, out_};
    auto run = [](void* data, size_t index) {
      const Job& j = *static_cast<const Job*>(data);
      const auto c = static_cast<int64_t>(index);
      j.packed->Run(j.a, j.m, j.out, c * j.panels / j.chunks, (c + 1) * j.panels / j.chunks);
    };
    Check(ORT_CALL(KernelContext_ParallelFor, context, run, static_cast<size_t>(chunks), 0, &job));
  } else {
    (void)context, (void)m;
  }
}

template <class C>
void Gemm<C>::Repeated::RunRows(const C* a, int64_t first, int64_t last) const {
  if constexpr (std::is_same_v<C, float>) {
    if (last > first && n_ > 0) {
      packed_->Run(a + first * k_, last - first, out_ + first * n_, 0, packed_->panels());
    }
  } else {
    (void)a, (void)first, (void)last;
  }
}

template <class C>
void Gemm<C>::Repeated::RunMatVec(const OrtKernelContext* context) {
  if constexpr (std::is_same_v<C, float>) {
    // Contiguous ranges of rows of b of about kChunkWork multiply-adds each, whole blocks of 8.
    const int64_t chunks = std::clamp<int64_t>(n_ * k_ / kChunkWork, 1, (n_ + 7) / 8);
    if (chunks == 1) {
      PackedProduct::MatVec(b_, k_, a_, out_, 0, n_);
      return;
    }
    struct Job {
      const float *b, *a;
      int64_t k, n, chunks;
      float* out;
    } job{b_, a_, k_, n_, chunks, out_};
    auto run = [](void* data, size_t index) {
      const Job& j = *static_cast<const Job*>(data);
      const auto c = static_cast<int64_t>(index);
      const int64_t blocks = (j.n + 7) / 8;
      PackedProduct::MatVec(j.b, j.k, j.a, j.out, std::min(j.n, c * blocks / j.chunks * 8),
                            std::min(j.n, (c + 1) * blocks / j.chunks * 8));
    };
    Check(ORT_CALL(KernelContext_ParallelFor, context, run, static_cast<size_t>(chunks), 0, &job));
  } else {
    (void)context;
  }
}

template class Gemm<float>;
template class Gemm<double>;

}  // namespace omr
