// The part of onnxruntime's C API this kernel uses, declared here (no onnxruntime header is
// vendored or downloaded).
//
// OrtApi is an append-only table of function pointers: an entry keeps its index in every
// runtime that serves the API version it was added in, so each entry below is declared by its
// index and signature and looked up in the table the runtime hands to RegisterCustomOps.
// RegisterCustomOps first asks the runtime for kOrtApiVersion and refuses to register if it
// does not serve it.
//
// Facts read (through a code search of public copies, 2026-12-02) from onnxruntime's
// include/onnxruntime/core/session/onnxruntime_c_api.h and
// onnxruntime/core/session/onnxruntime_c_api.cc:
// - entries 0 to 218 (API versions 1 to 12): the ort_api_1_to_N initialiser list and its
//   static_asserts on the last entry of each version (ReleaseCustomOpDomain 101, ReleaseKernelInfo
//   218) in microsoft/onnxruntime at commit 003d0358 and in the chxfly/onnxruntime-v1.31.1 copy;
// - KernelInfoGetAttributeArray_string, 417 (API version 25): the header copy that declares
//   ORT_API_VERSION 30 lists, after KernelInfo_GetOperatorSinceVersion (394), GetInteropApi ...
//   CreateEnvWithOptions (406) ... RunOptionsSetSyncStream (413),
//   GetTensorElementTypeAndShapeDataReference (414), RunOptionsEnableProfiling,
//   RunOptionsDisableProfiling, KernelInfoGetAttributeArray_string,
//   SetPerSessionThreadPoolCallbacks (418); a Rust binding of API 24 asserts the offsets of
//   CreateEnvWithOptions (406) and GetTensorElementTypeAndShapeDataReference (414, the last entry
//   of version 24) and a C# binding gives SetPerSessionThreadPoolCallbacks as the last entry of
//   version 25. (A development snapshot of 1.25's .cc ends version 24 at 411: not what shipped.)
// - KernelContext_ParallelFor, 274: that header lists it after ReadOpAttr and
//   SetDeterministicCompute, and a Julia binding's table of byte offsets gives ReadOpAttr 2176,
//   SetDeterministicCompute 2184, KernelContext_ParallelFor 2192 (= 8 x 274), CreateOp 1704
//   (= 8 x 213, as above).
// The OrtCustomOp layout is the one of that version-30 header.
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {

// The API version whose table holds every entry declared below.
constexpr uint32_t kOrtApiVersion = 25;

struct OrtStatus;
struct OrtEnv;
struct OrtValue;
struct OrtMemoryInfo;
struct OrtTensorTypeAndShapeInfo;
struct OrtSessionOptions;
struct OrtCustomOpDomain;
struct OrtKernelInfo;
struct OrtKernelContext;
struct OrtAllocator;
struct OrtOp;
struct OrtOpAttr;
struct OrtShapeInferContext;
struct OrtApi;  // only ever a table of entries, read through OrtApiTable

typedef enum ONNXTensorElementDataType {
  ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED = 0,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT = 1,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32 = 6,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL = 9,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16 = 10,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE = 11,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16 = 16,
} ONNXTensorElementDataType;

typedef enum OrtErrorCode {
  ORT_OK = 0,
  ORT_FAIL = 1,
  ORT_INVALID_ARGUMENT = 2,
} OrtErrorCode;

typedef enum OrtAllocatorType {
  OrtDeviceAllocator = 0,
  OrtArenaAllocator = 1,
} OrtAllocatorType;

typedef enum OrtMemType {
  OrtMemTypeDefault = 0,
} OrtMemType;

typedef enum OrtOpAttrType {
  ORT_OP_ATTR_UNDEFINED = 0,
  ORT_OP_ATTR_INT,
  ORT_OP_ATTR_INTS,
  ORT_OP_ATTR_FLOAT,
  ORT_OP_ATTR_FLOATS,
  ORT_OP_ATTR_STRING,
  ORT_OP_ATTR_STRINGS,
} OrtOpAttrType;

typedef enum OrtCustomOpInputOutputCharacteristic {
  INPUT_OUTPUT_REQUIRED = 0,
  INPUT_OUTPUT_OPTIONAL,
  INPUT_OUTPUT_VARIADIC,
} OrtCustomOpInputOutputCharacteristic;

struct OrtApiBase {
  const OrtApi* (*GetApi)(uint32_t version) noexcept;
  const char* (*GetVersionString)() noexcept;
};

// One line per entry used: OMR_ORT_API(name, index, return type, parameters...).
#define OMR_ORT_API_ENTRIES(OMR_ORT_API)                                                          \
  OMR_ORT_API(CreateStatus, 0, OrtStatus*, OrtErrorCode code, const char* msg)                    \
  OMR_ORT_API(GetErrorMessage, 2, const char*, const OrtStatus* status)                           \
  OMR_ORT_API(CreateCustomOpDomain, 26, OrtStatus*, const char* domain, OrtCustomOpDomain** out)  \
  OMR_ORT_API(CustomOpDomain_Add, 27, OrtStatus*, OrtCustomOpDomain* domain,                      \
              const struct OrtCustomOp* op)                                                       \
  OMR_ORT_API(AddCustomOpDomain, 28, OrtStatus*, OrtSessionOptions* options,                      \
              OrtCustomOpDomain* domain)                                                          \
  OMR_ORT_API(CreateTensorWithDataAsOrtValue, 49, OrtStatus*, const OrtMemoryInfo* info,          \
              void* data, size_t data_length, const int64_t* shape, size_t shape_length,          \
              ONNXTensorElementDataType type, OrtValue** out)                                     \
  OMR_ORT_API(GetTensorMutableData, 51, OrtStatus*, OrtValue* value, void** out)                  \
  OMR_ORT_API(GetTensorElementType, 60, OrtStatus*, const OrtTensorTypeAndShapeInfo* info,        \
              ONNXTensorElementDataType* out)                                                     \
  OMR_ORT_API(GetDimensionsCount, 61, OrtStatus*, const OrtTensorTypeAndShapeInfo* info,          \
              size_t* out)                                                                        \
  OMR_ORT_API(GetDimensions, 62, OrtStatus*, const OrtTensorTypeAndShapeInfo* info,               \
              int64_t* dim_values, size_t dim_values_length)                                      \
  OMR_ORT_API(GetTensorTypeAndShape, 65, OrtStatus*, const OrtValue* value,                       \
              OrtTensorTypeAndShapeInfo** out)                                                    \
  OMR_ORT_API(CreateCpuMemoryInfo, 69, OrtStatus*, OrtAllocatorType type, OrtMemType mem_type,    \
              OrtMemoryInfo** out)                                                                \
  OMR_ORT_API(AllocatorFree, 76, OrtStatus*, OrtAllocator* allocator, void* p)                    \
  OMR_ORT_API(GetAllocatorWithDefaultOptions, 78, OrtStatus*, OrtAllocator** out)                 \
  OMR_ORT_API(KernelInfoGetAttribute_float, 85, OrtStatus*, const OrtKernelInfo* info,            \
              const char* name, float* out)                                                       \
  OMR_ORT_API(KernelInfoGetAttribute_int64, 86, OrtStatus*, const OrtKernelInfo* info,            \
              const char* name, int64_t* out)                                                     \
  OMR_ORT_API(KernelInfoGetAttribute_string, 87, OrtStatus*, const OrtKernelInfo* info,           \
              const char* name, char* out, size_t* size)                                          \
  OMR_ORT_API(KernelContext_GetInputCount, 88, OrtStatus*, const OrtKernelContext* context,       \
              size_t* out)                                                                        \
  OMR_ORT_API(KernelContext_GetOutputCount, 89, OrtStatus*, const OrtKernelContext* context,      \
              size_t* out)                                                                        \
  OMR_ORT_API(KernelContext_GetInput, 90, OrtStatus*, const OrtKernelContext* context,            \
              size_t index, const OrtValue** out)                                                 \
  OMR_ORT_API(KernelContext_GetOutput, 91, OrtStatus*, OrtKernelContext* context, size_t index,   \
              const int64_t* dim_values, size_t dim_count, OrtValue** out)                        \
  OMR_ORT_API(ReleaseStatus, 93, void, OrtStatus* status)                                         \
  OMR_ORT_API(ReleaseMemoryInfo, 94, void, OrtMemoryInfo* info)                                   \
  OMR_ORT_API(ReleaseValue, 96, void, OrtValue* value)                                            \
  OMR_ORT_API(ReleaseTensorTypeAndShapeInfo, 99, void, OrtTensorTypeAndShapeInfo* info)           \
  OMR_ORT_API(KernelInfoGetAttributeArray_float, 162, OrtStatus*, const OrtKernelInfo* info,      \
              const char* name, float* out, size_t* size)                                         \
  OMR_ORT_API(CreateOpAttr, 211, OrtStatus*, const char* name, const void* data, int len,         \
              OrtOpAttrType type, OrtOpAttr** op_attr)                                            \
  OMR_ORT_API(ReleaseOpAttr, 212, void, OrtOpAttr* op_attr)                                       \
  OMR_ORT_API(CreateOp, 213, OrtStatus*, const OrtKernelInfo* info, const char* op_name,          \
              const char* domain, int version, const char** type_constraint_names,                \
              const ONNXTensorElementDataType* type_constraint_values, int type_constraint_count, \
              const OrtOpAttr* const* attr_values, int attr_count, int input_count,               \
              int output_count, OrtOp** ort_op)                                                   \
  OMR_ORT_API(InvokeOp, 214, OrtStatus*, const OrtKernelContext* context, const OrtOp* ort_op,    \
              const OrtValue* const* input_values, int input_count,                               \
              OrtValue* const* output_values, int output_count)                                   \
  OMR_ORT_API(ReleaseOp, 215, void, OrtOp* ort_op)                                                \
  OMR_ORT_API(KernelContext_ParallelFor, 274, OrtStatus*, const OrtKernelContext* context,        \
              void (*fn)(void* data, size_t index), size_t total, size_t num_batch, void* data)   \
  OMR_ORT_API(KernelInfoGetAttributeArray_string, 417, OrtStatus*, const OrtKernelInfo* info,     \
              const char* name, OrtAllocator* allocator, char*** out, size_t* size)

// The custom-op description the runtime reads: every field up to the version in `version`.
struct OrtCustomOp {
  uint32_t version;
  void* (*CreateKernel)(const OrtCustomOp* op, const OrtApi* api, const OrtKernelInfo* info);
  const char* (*GetName)(const OrtCustomOp* op);
  const char* (*GetExecutionProviderType)(const OrtCustomOp* op);
  ONNXTensorElementDataType (*GetInputType)(const OrtCustomOp* op, size_t index);
  size_t (*GetInputTypeCount)(const OrtCustomOp* op);
  ONNXTensorElementDataType (*GetOutputType)(const OrtCustomOp* op, size_t index);
  size_t (*GetOutputTypeCount)(const OrtCustomOp* op);
  void (*KernelCompute)(void* op_kernel, OrtKernelContext* context);
  void (*KernelDestroy)(void* op_kernel);
  OrtCustomOpInputOutputCharacteristic (*GetInputCharacteristic)(const OrtCustomOp* op,
                                                                 size_t index);
  OrtCustomOpInputOutputCharacteristic (*GetOutputCharacteristic)(const OrtCustomOp* op,
                                                                  size_t index);
  OrtMemType (*GetInputMemoryType)(const OrtCustomOp* op, size_t index);
  int (*GetVariadicInputMinArity)(const OrtCustomOp* op);
  int (*GetVariadicInputHomogeneity)(const OrtCustomOp* op);
  int (*GetVariadicOutputMinArity)(const OrtCustomOp* op);
  int (*GetVariadicOutputHomogeneity)(const OrtCustomOp* op);
  OrtStatus* (*CreateKernelV2)(const OrtCustomOp* op, const OrtApi* api, const OrtKernelInfo* info,
                               void** kernel);
  OrtStatus* (*KernelComputeV2)(void* op_kernel, OrtKernelContext* context);
  OrtStatus* (*InferOutputShapeFn)(const OrtCustomOp* op, OrtShapeInferContext* context);
  int (*GetStartVersion)(const OrtCustomOp* op);
  int (*GetEndVersion)(const OrtCustomOp* op);
  size_t (*GetMayInplace)(int** input_index, int** output_index);
  void (*ReleaseMayInplace)(int* input_index, int* output_index);
  size_t (*GetAliasMap)(int** input_index, int** output_index);
  void (*ReleaseAliasMap)(int* input_index, int* output_index);
};

}  // extern "C"

// The entries above, read from the table by index. Every call goes through `ort()`, which counts
// it (the tests check that each declared entry is called, so a wrong index shows).
struct OrtApiTable {
#define OMR_ORT_API_MEMBER(name, index, ret, ...) ret (*name)(__VA_ARGS__) noexcept;
  OMR_ORT_API_ENTRIES(OMR_ORT_API_MEMBER)
#undef OMR_ORT_API_MEMBER
};

enum class OrtApiEntry {
#define OMR_ORT_API_ENUM(name, index, ret, ...) name,
  OMR_ORT_API_ENTRIES(OMR_ORT_API_ENUM)
#undef OMR_ORT_API_ENUM
      kCount
};

// Fills `table` from the runtime's OrtApi of version kOrtApiVersion.
void LoadOrtApiTable(const OrtApi* api, OrtApiTable* table);

// The loaded table; only valid after a successful RegisterCustomOps.
const OrtApiTable& OrtApiTableLoaded();
OrtApiTable* MutableOrtApiTable();

// Counts one call of `entry` (relaxed atomic).
void CountOrtApiCall(OrtApiEntry entry);

#define ORT_CALL(name, ...) \
  (CountOrtApiCall(OrtApiEntry::name), OrtApiTableLoaded().name(__VA_ARGS__))
