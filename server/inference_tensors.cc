#include "server/inference_tensors.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"

namespace placer::server::oip {
namespace {

enum class Kind { kBool, kSigned, kUnsigned, kFloat, kBytes };

struct Datatype {
  const char* name;
  Kind kind;
  int bytes;  // per element in raw data; 0 for BYTES (length-prefixed)
};

// The protocol's datatypes. FP16 and BF16 are only read as raw data (there is no typed field
// for them); no input of placer's takes them, so they are named but never converted.
constexpr Datatype kDatatypes[] = {
    {"BOOL", Kind::kBool, 1},       {"UINT8", Kind::kUnsigned, 1},  {"UINT16", Kind::kUnsigned, 2},
    {"UINT32", Kind::kUnsigned, 4}, {"UINT64", Kind::kUnsigned, 8}, {"INT8", Kind::kSigned, 1},
    {"INT16", Kind::kSigned, 2},    {"INT32", Kind::kSigned, 4},    {"INT64", Kind::kSigned, 8},
    {"FP16", Kind::kFloat, 2},      {"BF16", Kind::kFloat, 2},      {"FP32", Kind::kFloat, 4},
    {"FP64", Kind::kFloat, 8},      {"BYTES", Kind::kBytes, 0},
};

std::optional<Datatype> FindDatatype(const std::string& name) {
  for (const Datatype& type : kDatatypes) {
    if (name == type.name) return type;
  }
  return std::nullopt;
}

std::string Quoted(absl::string_view name) { return absl::StrCat("input '", name, "'"); }

absl::Status WrongDatatype(const InputTensor& tensor, absl::string_view expected) {
  return absl::InvalidArgumentError(absl::StrCat(Quoted(tensor.name()), ": datatype ",
                                                 tensor.datatype(), " where ", expected,
                                                 " is expected"));
}

// Typed contents of the field the datatype uses: how many elements they hold.
int TypedCount(const InputTensor& tensor, const Datatype& type) {
  const inference::InferTensorContents& c = tensor.contents();
  const std::string& name = tensor.datatype();
  switch (type.kind) {
    case Kind::kBool:
      return c.bool_contents_size();
    case Kind::kBytes:
      return c.bytes_contents_size();
    case Kind::kSigned:
      return name == "INT64" ? c.int64_contents_size() : c.int_contents_size();
    case Kind::kUnsigned:
      return name == "UINT64" ? c.uint64_contents_size() : c.uint_contents_size();
    case Kind::kFloat:
      if (name == "FP32") return c.fp32_contents_size();
      if (name == "FP64") return c.fp64_contents_size();
      return 0;
  }
  return 0;
}

bool HasAnyContents(const InputTensor& tensor) {
  const inference::InferTensorContents& c = tensor.contents();
  return c.bool_contents_size() + c.int_contents_size() + c.int64_contents_size() +
             c.uint_contents_size() + c.uint64_contents_size() + c.fp32_contents_size() +
             c.fp64_contents_size() + c.bytes_contents_size() >
         0;
}

template <class T>
T LoadLittleEndian(const char* bytes) {
  T value;
  std::memcpy(&value, bytes, sizeof(T));  // little-endian hosts only, as Forward's logits
  return value;
}

uint32_t LoadLength(const char* bytes) {
  const auto* b = reinterpret_cast<const unsigned char*>(bytes);
  return uint32_t{b[0]} | uint32_t{b[1]} << 8 | uint32_t{b[2]} << 16 | uint32_t{b[3]} << 24;
}

// One raw element of an integer datatype.
std::optional<int64_t> RawInteger(const char* p, const std::string& name) {
  if (name == "INT8") return LoadLittleEndian<int8_t>(p);
  if (name == "INT16") return LoadLittleEndian<int16_t>(p);
  if (name == "INT32") return LoadLittleEndian<int32_t>(p);
  if (name == "INT64") return LoadLittleEndian<int64_t>(p);
  if (name == "UINT8") return LoadLittleEndian<uint8_t>(p);
  if (name == "UINT16") return LoadLittleEndian<uint16_t>(p);
  if (name == "UINT32") return LoadLittleEndian<uint32_t>(p);
  const uint64_t value = LoadLittleEndian<uint64_t>(p);
  if (value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
  return static_cast<int64_t>(value);
}

}  // namespace

absl::StatusOr<int64_t> ElementCount(const google::protobuf::RepeatedField<int64_t>& shape,
                                     absl::string_view tensor) {
  constexpr int64_t kMaxElements = int64_t{1} << 31;
  int64_t count = 1;
  for (int i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0) {
      return absl::InvalidArgumentError(absl::StrCat(tensor, ": shape dimension ", i, " is ",
                                                     shape[i], ", dimensions cannot be negative"));
    }
    if (shape[i] > 0 && count > kMaxElements / shape[i]) {
      return absl::InvalidArgumentError(absl::StrCat(tensor, ": shape [", absl::StrJoin(shape, ","),
                                                     "] has more than 2^31 ", "elements"));
    }
    count *= shape[i];
  }
  return count;
}

absl::StatusOr<std::vector<std::string>> DecodeBytesElements(absl::string_view raw, int64_t count,
                                                             absl::string_view tensor) {
  std::vector<std::string> elements;
  std::size_t at = 0;
  for (int64_t i = 0; i < count; ++i) {
    if (raw.size() - at < 4) {
      return absl::InvalidArgumentError(absl::StrCat(
          tensor, ": BYTES element ", i, " of ", count, " has no 4-byte length (", raw.size() - at,
          " byte(s) left; each element is a little-endian uint32 length, then the bytes)"));
    }
    const uint32_t length = LoadLength(raw.data() + at);
    at += 4;
    if (raw.size() - at < length) {
      return absl::InvalidArgumentError(absl::StrCat(tensor, ": BYTES element ", i, " says ",
                                                     length, " bytes but only ", raw.size() - at,
                                                     " are left"));
    }
    elements.emplace_back(raw.substr(at, length));
    at += length;
  }
  if (at != raw.size()) {
    return absl::InvalidArgumentError(absl::StrCat(tensor, ": ", raw.size() - at,
                                                   " byte(s) after the ", count,
                                                   " BYTES element(s) its shape holds"));
  }
  return elements;
}

absl::StatusOr<std::vector<LocatedInput>> LocateInputs(
    const inference::ModelInferRequest& request) {
  const bool raw = request.raw_input_contents_size() > 0;
  if (raw && request.raw_input_contents_size() != request.inputs_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("raw_input_contents: ", request.raw_input_contents_size(), " entries for ",
                     request.inputs_size(), " inputs (one per input, in order, when used)"));
  }
  std::vector<LocatedInput> located;
  std::set<std::string> names;
  for (int i = 0; i < request.inputs_size(); ++i) {
    const InputTensor& tensor = request.inputs(i);
    const std::string where = Quoted(tensor.name());
    if (tensor.name().empty()) {
      return absl::InvalidArgumentError(absl::StrCat("inputs[", i, "]: no name"));
    }
    if (!names.insert(tensor.name()).second) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": given more than once"));
    }
    const std::optional<Datatype> type = FindDatatype(tensor.datatype());
    if (!type) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": unknown datatype '", tensor.datatype(), "'"));
    }
    PLACER_ASSIGN_OR_RETURN(const int64_t count, ElementCount(tensor.shape(), where));
    LocatedInput input{&tensor, raw ? &request.raw_input_contents(i) : nullptr};
    if (raw) {
      if (HasAnyContents(tensor)) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": has contents although the request uses raw_input_contents"));
      }
      if (type->bytes > 0 &&
          static_cast<uint64_t>(input.raw->size()) != static_cast<uint64_t>(count) * type->bytes) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": ", input.raw->size(), " raw bytes, but shape [",
                         absl::StrJoin(tensor.shape(), ","), "] of ", tensor.datatype(), " needs ",
                         count * type->bytes));
      }
    } else {
      if (type->name == absl::string_view("FP16") || type->name == absl::string_view("BF16")) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": ", type->name, " data can only be sent in raw_input_contents"));
      }
      if (TypedCount(tensor, *type) != count || (count == 0 && HasAnyContents(tensor))) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": shape [", absl::StrJoin(tensor.shape(), ","), "] holds ", count,
                         " element(s) but its contents for ", tensor.datatype(), " have ",
                         TypedCount(tensor, *type)));
      }
    }
    located.push_back(input);
  }
  return located;
}

absl::StatusOr<std::vector<std::string>> ReadBytes(const LocatedInput& input) {
  const InputTensor& tensor = *input.tensor;
  if (tensor.datatype() != "BYTES") return WrongDatatype(tensor, "BYTES");
  PLACER_ASSIGN_OR_RETURN(const int64_t count, ElementCount(tensor.shape(), Quoted(tensor.name())));
  if (input.raw != nullptr) return DecodeBytesElements(*input.raw, count, Quoted(tensor.name()));
  return std::vector<std::string>(tensor.contents().bytes_contents().begin(),
                                  tensor.contents().bytes_contents().end());
}

absl::StatusOr<std::vector<bool>> ReadBools(const LocatedInput& input) {
  const InputTensor& tensor = *input.tensor;
  if (tensor.datatype() != "BOOL") return WrongDatatype(tensor, "BOOL");
  if (input.raw == nullptr) {
    return std::vector<bool>(tensor.contents().bool_contents().begin(),
                             tensor.contents().bool_contents().end());
  }
  std::vector<bool> values;
  for (const char byte : *input.raw) values.push_back(byte != 0);
  return values;
}

absl::StatusOr<std::vector<int64_t>> ReadIntegers(const LocatedInput& input) {
  const InputTensor& tensor = *input.tensor;
  const std::optional<Datatype> type = FindDatatype(tensor.datatype());
  if (!type || (type->kind != Kind::kSigned && type->kind != Kind::kUnsigned)) {
    return WrongDatatype(tensor, "an integer (INT32, INT64, UINT32, ...)");
  }
  std::vector<int64_t> values;
  if (input.raw != nullptr) {
    for (std::size_t at = 0; at < input.raw->size(); at += type->bytes) {
      const std::optional<int64_t> value = RawInteger(input.raw->data() + at, tensor.datatype());
      if (!value) {
        return absl::InvalidArgumentError(absl::StrCat(Quoted(tensor.name()), ": element ",
                                                       at / type->bytes, " is above INT64_MAX"));
      }
      values.push_back(*value);
    }
    return values;
  }
  const inference::InferTensorContents& c = tensor.contents();
  if (tensor.datatype() == "INT64")
    return std::vector<int64_t>(c.int64_contents().begin(), c.int64_contents().end());
  if (type->kind == Kind::kSigned)
    return std::vector<int64_t>(c.int_contents().begin(), c.int_contents().end());
  if (tensor.datatype() != "UINT64")
    return std::vector<int64_t>(c.uint_contents().begin(), c.uint_contents().end());
  for (const uint64_t value : c.uint64_contents()) {
    if (value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return absl::InvalidArgumentError(
          absl::StrCat(Quoted(tensor.name()), ": ", value, " is above INT64_MAX"));
    }
    values.push_back(static_cast<int64_t>(value));
  }
  return values;
}

absl::StatusOr<std::vector<double>> ReadDoubles(const LocatedInput& input) {
  const InputTensor& tensor = *input.tensor;
  const std::string& name = tensor.datatype();
  if (name != "FP32" && name != "FP64") {
    const std::optional<Datatype> type = FindDatatype(name);
    if (type && (type->kind == Kind::kSigned || type->kind == Kind::kUnsigned)) {
      PLACER_ASSIGN_OR_RETURN(const std::vector<int64_t> integers, ReadIntegers(input));
      return std::vector<double>(integers.begin(), integers.end());
    }
    return WrongDatatype(tensor, "FP32 or FP64");
  }
  std::vector<double> values;
  if (input.raw != nullptr) {
    const std::size_t size = name == "FP32" ? 4 : 8;
    for (std::size_t at = 0; at < input.raw->size(); at += size) {
      const char* p = input.raw->data() + at;
      values.push_back(size == 4 ? LoadLittleEndian<float>(p) : LoadLittleEndian<double>(p));
    }
  } else if (name == "FP32") {
    values.assign(tensor.contents().fp32_contents().begin(),
                  tensor.contents().fp32_contents().end());
  } else {
    values.assign(tensor.contents().fp64_contents().begin(),
                  tensor.contents().fp64_contents().end());
  }
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat(Quoted(tensor.name()), ": element ", i, " is not a finite number"));
    }
  }
  return values;
}

namespace {

inference::ModelInferResponse::InferOutputTensor* AddOutput(
    const std::string& name, const char* datatype, std::vector<int64_t> shape,
    inference::ModelInferResponse* response) {
  auto* output = response->add_outputs();
  output->set_name(name);
  output->set_datatype(datatype);
  for (const int64_t dim : shape) output->add_shape(dim);
  return output;
}

}  // namespace

void AddBytesOutput(const std::string& name, std::vector<int64_t> shape,
                    const std::vector<std::string>& elements,
                    inference::ModelInferResponse* response) {
  AddOutput(name, "BYTES", std::move(shape), response);
  std::string* raw = response->add_raw_output_contents();
  for (const std::string& element : elements) {
    const auto length = static_cast<uint32_t>(element.size());
    const char prefix[4] = {static_cast<char>(length), static_cast<char>(length >> 8),
                            static_cast<char>(length >> 16), static_cast<char>(length >> 24)};
    raw->append(prefix, 4);
    raw->append(element);
  }
}

void AddInt32Output(const std::string& name, std::vector<int64_t> shape,
                    const std::vector<int32_t>& elements, inference::ModelInferResponse* response) {
  AddOutput(name, "INT32", std::move(shape), response);
  response->add_raw_output_contents()->assign(reinterpret_cast<const char*>(elements.data()),
                                              elements.size() * sizeof(int32_t));
}

void AddFp32Output(const std::string& name, std::vector<int64_t> shape, const float* elements,
                   std::size_t count, inference::ModelInferResponse* response) {
  AddOutput(name, "FP32", std::move(shape), response);
  response->add_raw_output_contents()->assign(reinterpret_cast<const char*>(elements),
                                              count * sizeof(float));
}

}  // namespace placer::server::oip
