// RegisterCustomOps: the library's entry point. Declares MaskedLSTM, MaskedGRU and MaskedRNN,
// version 1, in the package's domain, each for float, double, float16 and bfloat16.
#include <climits>
#include <mutex>
#include <string>

#include "masked_rnn.h"
#include "ort_api.h"
#include "status.h"

#ifndef OMR_DOMAIN
#error "OMR_DOMAIN (onnx_masked_rnn._domain.DOMAIN) must be defined by the build"
#endif

namespace omr {

namespace {

struct MaskedOp : OrtCustomOp {
  OpKind kind;
  ONNXTensorElementDataType type;
};

const MaskedOp& Self(const OrtCustomOp* op) { return *static_cast<const MaskedOp*>(op); }

bool IsLstm(const OrtCustomOp* op) { return Self(op).kind == OpKind::kLstm; }

size_t InputCount(const OrtCustomOp* op) { return IsLstm(op) ? 9 : 7; }

ONNXTensorElementDataType InputType(const OrtCustomOp* op, size_t index) {
  if (index == 4) return ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32;                  // sequence_lens
  if (index == InputCount(op) - 1) return ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL;  // mask
  return Self(op).type;
}

OrtCustomOpInputOutputCharacteristic InputCharacteristic(const OrtCustomOp*, size_t index) {
  return index < 3 ? INPUT_OUTPUT_REQUIRED : INPUT_OUTPUT_OPTIONAL;
}

OrtStatus* CreateKernel(const OrtCustomOp* op, const OrtApi*, const OrtKernelInfo* info,
                        void** kernel) {
  return Guard([&] { *kernel = new MaskedRnnKernel(Self(op).kind, Self(op).type, info); });
}

OrtStatus* Compute(void* kernel, OrtKernelContext* context) {
  return Guard([&] { static_cast<const MaskedRnnKernel*>(kernel)->Compute(context); });
}

void Destroy(void* kernel) { delete static_cast<MaskedRnnKernel*>(kernel); }

MaskedOp MakeOp(OpKind kind, ONNXTensorElementDataType type) {
  MaskedOp op{};
  op.version = kOrtApiVersion;
  op.kind = kind;
  op.type = type;
  op.CreateKernel = nullptr;
  op.GetName = [](const OrtCustomOp* o) { return OpName(Self(o).kind); };
  op.GetExecutionProviderType = [](const OrtCustomOp*) -> const char* { return nullptr; };
  op.GetInputType = InputType;
  op.GetInputTypeCount = InputCount;
  op.GetOutputType = [](const OrtCustomOp* o, size_t) { return Self(o).type; };
  op.GetOutputTypeCount = [](const OrtCustomOp* o) -> size_t { return IsLstm(o) ? 3 : 2; };
  op.KernelCompute = nullptr;
  op.KernelDestroy = Destroy;
  op.GetInputCharacteristic = InputCharacteristic;
  op.GetOutputCharacteristic = [](const OrtCustomOp*, size_t) { return INPUT_OUTPUT_OPTIONAL; };
  op.GetInputMemoryType = [](const OrtCustomOp*, size_t) { return OrtMemTypeDefault; };
  op.GetVariadicInputMinArity = [](const OrtCustomOp*) { return 1; };
  op.GetVariadicInputHomogeneity = [](const OrtCustomOp*) { return 1; };
  op.GetVariadicOutputMinArity = [](const OrtCustomOp*) { return 1; };
  op.GetVariadicOutputHomogeneity = [](const OrtCustomOp*) { return 1; };
  op.CreateKernelV2 = CreateKernel;
  op.KernelComputeV2 = Compute;
  op.InferOutputShapeFn = nullptr;
  op.GetStartVersion = [](const OrtCustomOp*) { return 1; };
  op.GetEndVersion = [](const OrtCustomOp*) { return INT_MAX; };
  op.GetMayInplace = [](int**, int**) -> size_t { return 0; };
  op.ReleaseMayInplace = [](int*, int*) {};
  op.GetAliasMap = [](int**, int**) -> size_t { return 0; };
  op.ReleaseAliasMap = [](int*, int*) {};
  return op;
}

constexpr ONNXTensorElementDataType kTypes[] = {
    ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE,
    ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16, ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16};
constexpr OpKind kKinds[] = {OpKind::kLstm, OpKind::kGru, OpKind::kRnn};

struct AllOps {
  MaskedOp ops[3][4];
  AllOps() {
    for (int k = 0; k < 3; ++k) {
      for (int t = 0; t < 4; ++t) ops[k][t] = MakeOp(kKinds[k], kTypes[t]);
    }
  }
};

const AllOps& Ops() {
  static const AllOps ops;  // outlives every session that uses it
  return ops;
}

}  // namespace

}  // namespace omr

extern "C" __attribute__((visibility("default"))) OrtStatus* RegisterCustomOps(
    OrtSessionOptions* options, const OrtApiBase* base) {
  using namespace omr;
  const OrtApi* api = base->GetApi(kOrtApiVersion);
  if (api == nullptr) {
    // Entry 0 (CreateStatus) is the same in every version: report through version 1's table.
    const OrtApi* v1 = base->GetApi(1);
    if (v1 == nullptr) return nullptr;
    using CreateStatusFn = OrtStatus* (*)(OrtErrorCode, const char*) noexcept;
    auto create_status = reinterpret_cast<CreateStatusFn>(reinterpret_cast<void* const*>(v1)[0]);
    std::string message = "onnx_masked_rnn kernel: needs onnxruntime's C API version " +
                          std::to_string(kOrtApiVersion) + " (onnxruntime 1." +
                          std::to_string(kOrtApiVersion) + " or newer); this onnxruntime is " +
                          base->GetVersionString();
    return create_status(ORT_FAIL, message.c_str());
  }
  static std::once_flag loaded;
  std::call_once(loaded, [api] { LoadOrtApiTable(api, MutableOrtApiTable()); });
  return Guard([&] {
    // A round trip through three entries: a table read at wrong positions shows here, at once.
    const char* probe = "onnx_masked_rnn kernel: OrtApi self-check";
    OrtStatus* status = ORT_CALL(CreateStatus, ORT_INVALID_ARGUMENT, probe);
    const bool same = status != nullptr && std::string(ORT_CALL(GetErrorMessage, status)) == probe;
    if (status != nullptr) ORT_CALL(ReleaseStatus, status);
    if (!same)
      throw KernelError(ORT_FAIL, "onnx_masked_rnn kernel: the OrtApi table does not match");
    OrtCustomOpDomain* domain = nullptr;
    Check(ORT_CALL(CreateCustomOpDomain, OMR_DOMAIN, &domain));
    // The domain is never released: the sessions made from `options` refer to it.
    for (const auto& per_kind : Ops().ops) {
      for (const MaskedOp& op : per_kind) Check(ORT_CALL(CustomOpDomain_Add, domain, &op));
    }
    Check(ORT_CALL(AddCustomOpDomain, options, domain));
  });
}
