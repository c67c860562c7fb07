#include "server/inference_request.h"

#include <limits>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "server/inference_settings.h"
#include "server/inference_tensors.h"

namespace placer::server::oip {
namespace {

constexpr char kTextInput[] = "text_input";
constexpr char kInputIds[] = "input_ids";
constexpr char kSamplingParameters[] = "sampling_parameters";
constexpr char kTextOutput[] = "text_output";
constexpr char kOutputIds[] = "output_ids";
constexpr char kLogits[] = "logits";

std::string Quoted(const std::string& name) { return absl::StrCat("input '", name, "'"); }

std::string ShapeText(const InputTensor& tensor) {
  return absl::StrCat("[", absl::StrJoin(tensor.shape(), ","), "]");
}

// Request parameters that Triton's clients and servers use for themselves (sequence batching,
// priorities, empty final responses): not generation settings, and no reason to refuse a call.
bool IsTritonParameter(const std::string& name) {
  return name.rfind("triton_", 0) == 0 || name == "sequence_id" || name == "sequence_start" ||
         name == "sequence_end" || name == "priority" || name == "timeout" || name == "headers";
}

absl::StatusOr<SettingValue> FromParameter(const inference::InferParameter& parameter,
                                           const std::string& where) {
  switch (parameter.parameter_choice_case()) {
    case inference::InferParameter::kBoolParam:
      return SettingValue(parameter.bool_param());
    case inference::InferParameter::kInt64Param:
      return SettingValue(parameter.int64_param());
    case inference::InferParameter::kUint64Param:
      return SettingValue(parameter.uint64_param());
    case inference::InferParameter::kDoubleParam:
      return SettingValue(parameter.double_param());
    case inference::InferParameter::kStringParam:
      return SettingValue(parameter.string_param());
    case inference::InferParameter::PARAMETER_CHOICE_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat(where, ": no value set"));
}

// A one-prompt tensor: shape [1] or [1,1] (the vLLM and TensorRT-LLM backends' two forms).
// Returns its batch prefix.
absl::StatusOr<std::vector<int64_t>> SingleElementPrefix(const InputTensor& tensor) {
  const auto& shape = tensor.shape();
  if ((shape.size() == 1 && shape[0] == 1) ||
      (shape.size() == 2 && shape[0] == 1 && shape[1] == 1)) {
    return shape.size() == 2 ? std::vector<int64_t>{1} : std::vector<int64_t>{};
  }
  return absl::InvalidArgumentError(absl::StrCat(
      Quoted(tensor.name()), ": shape ", ShapeText(tensor), ", expected [1] or [1,1] (one value)"));
}

// A list: shape [n] or [1,n].
absl::StatusOr<std::vector<int64_t>> ListPrefix(const InputTensor& tensor) {
  const auto& shape = tensor.shape();
  if (shape.size() == 1) return std::vector<int64_t>{};
  if (shape.size() == 2 && shape[0] == 1) return std::vector<int64_t>{1};
  return absl::InvalidArgumentError(absl::StrCat(Quoted(tensor.name()), ": shape ",
                                                 ShapeText(tensor),
                                                 ", expected [n] or [1,n] (one sequence)"));
}

// A one-element setting tensor as a setting value of its datatype.
absl::StatusOr<SettingValue> SettingFromTensor(const LocatedInput& input) {
  const InputTensor& tensor = *input.tensor;
  const std::string& type = tensor.datatype();
  if (type == "BYTES") {
    PLACER_ASSIGN_OR_RETURN(std::vector<std::string> strings, ReadBytes(input));
    return SettingValue(std::move(strings));
  }
  if (type == "BOOL") {
    PLACER_ASSIGN_OR_RETURN(const std::vector<bool> values, ReadBools(input));
    return SettingValue(static_cast<bool>(values.at(0)));
  }
  if (type == "FP32" || type == "FP64" || type == "FP16" || type == "BF16") {
    PLACER_ASSIGN_OR_RETURN(const std::vector<double> values, ReadDoubles(input));
    return SettingValue(values.at(0));
  }
  PLACER_ASSIGN_OR_RETURN(const std::vector<int64_t> values, ReadIntegers(input));
  return SettingValue(values.at(0));
}

absl::Status ApplyTensorSetting(const LocatedInput& input, GenerationSettings* settings) {
  const InputTensor& tensor = *input.tensor;
  const std::string where = Quoted(tensor.name());
  const bool is_stop = tensor.name() == "stop" || tensor.name() == "stop_words";
  if (is_stop) {
    if (tensor.datatype() != "BYTES") {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": datatype ", tensor.datatype(), " where BYTES is expected"));
    }
    PLACER_RETURN_IF_ERROR(ListPrefix(tensor).status());
  } else {
    PLACER_RETURN_IF_ERROR(SingleElementPrefix(tensor).status());
  }
  PLACER_ASSIGN_OR_RETURN(const SettingValue value, SettingFromTensor(input));
  return ApplySetting(tensor.name(), value, where, settings);
}

std::string InputNames() {
  std::vector<std::string> names;
  for (const TensorSignature& input : ModelInputs()) names.push_back(input.name);
  return absl::StrJoin(names, ", ");
}

}  // namespace

const std::vector<TensorSignature>& ModelInputs() {
  static const auto* inputs = new std::vector<TensorSignature>{
      {kTextInput, "BYTES", {1}},
      {kInputIds, "INT32", {-1}},
      {"stream", "BOOL", {1}},
      {kSamplingParameters, "BYTES", {1}},
      {"max_tokens", "INT32", {1}},
      {"temperature", "FP32", {1}},
      {"top_p", "FP32", {1}},
      {"top_k", "INT32", {1}},
      {"seed", "UINT64", {1}},
      {"repetition_penalty", "FP32", {1}},
      {"stop", "BYTES", {-1}},
      {"ignore_eos", "BOOL", {1}},
      {"exclude_input_in_output", "BOOL", {1}},
      {"all_positions", "BOOL", {1}},
  };
  return *inputs;
}

const std::vector<TensorSignature>& ModelOutputs() {
  static const auto* outputs = new std::vector<TensorSignature>{
      {kTextOutput, "BYTES", {-1}},
      {kOutputIds, "INT32", {-1}},
      {kLogits, "FP32", {-1, -1}},
  };
  return *outputs;
}

absl::StatusOr<InferPlan> PlanInferRequest(const inference::ModelInferRequest& request) {
  PLACER_ASSIGN_OR_RETURN(const std::vector<LocatedInput> inputs, LocateInputs(request));
  GenerationSettings settings;
  for (const auto& [name, parameter] : request.parameters()) {
    if (IsTritonParameter(name)) continue;
    const std::string where = absl::StrCat("parameters.", name);
    PLACER_ASSIGN_OR_RETURN(const SettingValue value, FromParameter(parameter, where));
    PLACER_RETURN_IF_ERROR(ApplySetting(name, value, where, &settings));
  }

  InferPlan plan;
  const LocatedInput* text = nullptr;
  const LocatedInput* ids = nullptr;
  // sampling_parameters first, so that a setting's own tensor wins over the JSON.
  for (const LocatedInput& input : inputs) {
    if (input.tensor->name() != kSamplingParameters) continue;
    PLACER_RETURN_IF_ERROR(SingleElementPrefix(*input.tensor).status());
    PLACER_ASSIGN_OR_RETURN(const std::vector<std::string> json, ReadBytes(input));
    PLACER_RETURN_IF_ERROR(ApplySamplingParametersJson(json.at(0), &settings));
  }
  for (const LocatedInput& input : inputs) {
    const std::string& name = input.tensor->name();
    if (name == kTextInput) {
      text = &input;
    } else if (name == kInputIds) {
      ids = &input;
    } else if (name == kSamplingParameters) {
      continue;
    } else if (IsSettingName(name)) {
      PLACER_RETURN_IF_ERROR(ApplyTensorSetting(input, &settings));
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat(Quoted(name), ": not an input of placer's model (inputs: ", InputNames(),
                       "; stop_words and random_seed are accepted too)"));
    }
  }
  if (text != nullptr && ids != nullptr) {
    return absl::InvalidArgumentError(
        "inputs: text_input and input_ids both given; give one prompt, as text or as ids");
  }
  if (text == nullptr && ids == nullptr) {
    return absl::InvalidArgumentError(
        "inputs: no prompt; give text_input (BYTES) or input_ids (INT32 or INT64)");
  }

  std::set<std::string> wanted;
  for (const auto& output : request.outputs()) {
    if (output.name() != kTextOutput && output.name() != kOutputIds && output.name() != kLogits) {
      return absl::InvalidArgumentError(absl::StrCat(
          "outputs: '", output.name(), "' is not an output of placer's model (outputs: ",
          kTextOutput, ", ", kOutputIds, ", ", kLogits, ")"));
    }
    wanted.insert(output.name());
  }

  plan.stream = settings.stream.value_or(false);
  if (text != nullptr) {
    PLACER_ASSIGN_OR_RETURN(plan.batch_prefix, SingleElementPrefix(*text->tensor));
    PLACER_ASSIGN_OR_RETURN(const std::vector<std::string> prompt, ReadBytes(*text));
    plan.prompt_is_text = true;
    plan.generate.set_prompt(prompt.at(0));
    if (plan.generate.prompt().empty()) {
      return absl::InvalidArgumentError("input 'text_input': empty prompt");
    }
  } else {
    PLACER_ASSIGN_OR_RETURN(plan.batch_prefix, ListPrefix(*ids->tensor));
    if (ids->tensor->datatype() != "INT32" && ids->tensor->datatype() != "INT64") {
      return absl::InvalidArgumentError(absl::StrCat("input 'input_ids': datatype ",
                                                     ids->tensor->datatype(),
                                                     " where INT32 or INT64 is expected"));
    }
    PLACER_ASSIGN_OR_RETURN(const std::vector<int64_t> values, ReadIntegers(*ids));
    if (values.empty()) return absl::InvalidArgumentError("input 'input_ids': no token ids");
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (values[i] < 0 || values[i] > std::numeric_limits<int32_t>::max()) {
        return absl::InvalidArgumentError(
            absl::StrCat("input 'input_ids': element ", i, " is ", values[i], ", not a token id"));
      }
      plan.generate.add_prompt_token_ids(static_cast<int32_t>(values[i]));
      plan.forward.add_token_ids(static_cast<int32_t>(values[i]));
    }
  }

  if (wanted.count(kLogits) > 0) {
    if (text != nullptr || wanted.size() > 1 || plan.stream) {
      return absl::InvalidArgumentError(
          "outputs: logits come from one forward pass over input_ids, alone: no text_input, "
          "no other output, no stream");
    }
    plan.kind = InferPlan::Kind::kLogits;
    plan.forward.set_all_positions(settings.all_positions);
    return plan;
  }
  if (settings.all_positions) {
    return absl::InvalidArgumentError("all_positions: only with the logits output");
  }
  plan.kind = InferPlan::Kind::kGenerate;
  if (wanted.empty()) wanted.insert(text != nullptr ? kTextOutput : kOutputIds);
  plan.text_output = wanted.count(kTextOutput) > 0;
  plan.output_ids = wanted.count(kOutputIds) > 0;
  // The vLLM backend's default: a whole answer repeats the prompt, a stream does not.
  plan.include_prompt_text =
      plan.prompt_is_text && !settings.exclude_input_in_output.value_or(plan.stream);
  *plan.generate.mutable_params() = settings.params;
  return plan;
}

}  // namespace placer::server::oip
