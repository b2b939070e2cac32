// posenc._posenc: the compiled part of the Python package (the public names are re-exported by posenc/__init__.py
// and used by posenc/torch.py). Arrays cross as NumPy arrays or CPU torch tensors without copies.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "posenc/core/errors.h"
#include "posenc/core/threads.h"
#include "posenc/rope/hf_config.h"
#include "posenc/kernels/rope_kernels.h"
#include "posenc/rope/cos_sin.h"
#include "posenc/rope/frequencies.h"
#include "posenc/rope/hf_dynamic_state.h"
#include "rope_call.h"
#include "tensor_arg.h"

namespace posenc::python {
namespace {

// A parsed config and its frequency table at init (no sequence length), as HF's init computes it.
struct PyRopeConfig {
  HfRopeConfig hf;
  RopeFrequencies init;
};

PyRopeConfig MakeConfig(HfRopeConfig hf) {
  RopeFrequencies init = ComputeRopeFrequencies(hf.params);
  return {std::move(hf), std::move(init)};
}

PyRopeConfig ConfigFromJsonText(const std::string& text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw ConfigError(std::string("config is not valid JSON: ") + e.what());
  }
  return MakeConfig(ParseHfRopeConfig(j));
}

// dict | str | os.PathLike | object with to_dict() (a transformers PretrainedConfig) -> config.
PyRopeConfig ConfigFromHf(py::handle config) {
  if (py::isinstance<PyRopeConfig>(config)) return config.cast<PyRopeConfig>();
  py::module_ os = py::module_::import("os");
  if (py::isinstance<py::str>(config) || py::isinstance(config, os.attr("PathLike"))) {
    return MakeConfig(LoadHfRopeConfig(os.attr("fspath")(config).cast<std::string>()));
  }
  py::object dict = py::reinterpret_borrow<py::object>(config);
  if (!py::isinstance<py::dict>(config)) {
    if (!py::hasattr(config, "to_dict")) {
      throw py::type_error("config must be a dict, a path to a config.json, a posenc.RopeConfig or an object with "
                           "to_dict() (a transformers PretrainedConfig), got " +
                           py::str(py::type::of(config).attr("__name__")).cast<std::string>());
    }
    dict = config.attr("to_dict")();
  }
  const py::object dumps = py::module_::import("json").attr("dumps");
  return ConfigFromJsonText(dumps(dict, py::arg("default") = py::module_::import("builtins").attr("str"))
                                .cast<std::string>());
}

py::array_t<float> FloatArray(const std::vector<float>& v) {
  py::array_t<float> a(static_cast<py::ssize_t>(v.size()));
  std::copy(v.begin(), v.end(), a.mutable_data());
  return a;
}

RopePrecision ParsePrecision(const std::string& s) {
  if (s == "exact") return RopePrecision::kExact;
  if (s == "hf") return RopePrecision::kHf;
  throw py::value_error("precision must be 'exact' or 'hf', got '" + s + "'");
}

// position_ids as an array argument: NumPy arrays and torch tensors as they are, anything else through
// numpy.asarray(..., int64) (a list, an int).
py::object AsIndexArray(py::handle position_ids) {
  if (IsTorchTensor(position_ids) || py::isinstance<py::array>(position_ids)) {
    return py::reinterpret_borrow<py::object>(position_ids);
  }
  return py::module_::import("numpy").attr("asarray")(position_ids, "int64");
}

// seq_len of a call: the given one, or the largest position id + 1 (what a fresh HF rotary module uses).
std::optional<int64_t> SeqLenFor(const std::vector<int64_t>& positions, std::optional<int64_t> seq_len) {
  if (seq_len) {
    if (*seq_len < 1) throw py::value_error("seq_len must be >= 1, got " + std::to_string(*seq_len));
    return seq_len;
  }
  if (positions.empty()) return std::nullopt;
  return std::max<int64_t>(*std::max_element(positions.begin(), positions.end()) + 1, 1);
}

// The frequencies a call uses: a Frequencies object as it is, or a RopeConfig's at the call's seq_len.
RopeFrequencies FrequenciesFor(py::handle source, const std::vector<int64_t>& positions,
                               std::optional<int64_t> seq_len) {
  if (py::isinstance<RopeFrequencies>(source)) {
    if (seq_len) throw py::value_error("seq_len applies to a RopeConfig; these Frequencies are fixed already");
    return source.cast<RopeFrequencies>();
  }
  if (!py::isinstance<PyRopeConfig>(source)) {
    throw py::type_error("config must be a posenc.RopeConfig or posenc.Frequencies, got " +
                         py::str(py::type::of(source).attr("__name__")).cast<std::string>());
  }
  const PyRopeConfig& c = source.cast<const PyRopeConfig&>();
  return ComputeRopeFrequencies(c.hf.params, SeqLenFor(positions, seq_len));
}

// (cos, sin), each position_ids.shape + (rotary_dim,), float32, cat(table, table) as HF returns them.
py::tuple CosSin(py::handle source, py::handle position_ids, const std::string& precision,
                 std::optional<int64_t> seq_len) {
  const RopePrecision p = ParsePrecision(precision);
  const py::object ids_obj = AsIndexArray(position_ids);
  const TensorArg ids = ReadTensor(ids_obj, "position_ids");
  const std::vector<int64_t> positions = GatherInts(ids);
  const RopeFrequencies f = FrequenciesFor(source, positions, seq_len);
  const CosSinTable t = ComputeCosSin(f, positions, p);
  const int64_t half = t.half, rotary_dim = 2 * half;
  std::vector<py::ssize_t> shape(ids.shape.begin(), ids.shape.end());
  shape.push_back(rotary_dim);
  py::array_t<float> cos(shape), sin(shape);
  float* c = cos.mutable_data();
  float* s = sin.mutable_data();
  for (size_t r = 0; r < positions.size(); ++r) {
    for (int64_t i = 0; i < rotary_dim; ++i) {
      const size_t src = r * static_cast<size_t>(half) + static_cast<size_t>(i % half);
      c[r * static_cast<size_t>(rotary_dim) + static_cast<size_t>(i)] = t.cos[src];
      s[r * static_cast<size_t>(rotary_dim) + static_cast<size_t>(i)] = t.sin[src];
    }
  }
  return py::make_tuple(cos, sin);
}

RopeLayout LayoutFromInt(int layout) {
  if (layout == 0) return RopeLayout::kHalfSplit;
  if (layout == 1) return RopeLayout::kInterleaved;
  throw py::value_error("layout code must be 0 (half-split) or 1 (interleaved), got " + std::to_string(layout));
}

RopeDirection DirectionFromInt(int direction) {
  switch (direction) {
    case 0: return RopeDirection::kForward;
    case 1: return RopeDirection::kBackward;
    case 2: return RopeDirection::kInverse;
  }
  throw py::value_error("direction code must be 0 (forward), 1 (backward) or 2 (inverse), got " +
                        std::to_string(direction));
}

RopeCallOptions Options(int64_t unsqueeze_dim, int layout, int direction, std::optional<int64_t> rotary_dim) {
  return {LayoutFromInt(layout), DirectionFromInt(direction), unsqueeze_dim, rotary_dim};
}

// Work above this many elements runs with the GIL released (other Python threads keep going).
constexpr int64_t kReleaseGilElements = int64_t{1} << 16;

// The arguments of one table rotation, read once.
struct TableArgs {
  TensorArg q, cos, sin;
  std::optional<TensorArg> k, q_out, k_out;

  TableArgs(py::handle q_obj, py::handle k_obj, py::handle cos_obj, py::handle sin_obj, py::handle q_out_obj,
            py::handle k_out_obj)
      : q(ReadTensor(q_obj, "q")), cos(ReadTensor(cos_obj, "cos")), sin(ReadTensor(sin_obj, "sin")) {
    if (!k_obj.is_none()) k = ReadTensor(k_obj, "k");
    if (!q_out_obj.is_none()) q_out = ReadTensor(q_out_obj, "q_out");
    if (!k_out_obj.is_none()) {
      if (!k) throw py::value_error("k_out is given without k");
      k_out = ReadTensor(k_out_obj, "k_out");
    }
    if (k && !k_out_obj.is_none() != !q_out_obj.is_none()) {
      throw py::value_error("q_out and k_out must both be given (out of place) or both be None (in place)");
    }
  }
  bool in_place() const { return !q_out.has_value(); }
  void Run(const RopeCallOptions& o) const {
    RotateWithTable(q, k ? &*k : nullptr, q_out ? &*q_out : nullptr, k_out ? &*k_out : nullptr, cos, sin, o);
  }
  int64_t work() const { return q.numel() + (k ? k->numel() : 0); }
};

void Rotate(py::handle q, py::handle k, py::handle cos, py::handle sin, py::handle q_out, py::handle k_out,
            int64_t unsqueeze_dim, int layout, int direction, std::optional<int64_t> rotary_dim) {
  const TableArgs args(q, k, cos, sin, q_out, k_out);
  const RopeCallOptions o = Options(unsqueeze_dim, layout, direction, rotary_dim);
  if (args.in_place()) {
    CheckWritableInPlace(args.q);
    if (args.k) CheckWritableInPlace(*args.k);
  }
  if (args.work() >= kReleaseGilElements) {
    py::gil_scoped_release release;
    args.Run(o);
  } else {
    args.Run(o);
  }
  if (args.in_place()) {
    MarkModifiedInPlace(args.q);
    if (args.k) MarkModifiedInPlace(*args.k);
  }
}

void RotatePositions(py::handle q_obj, py::handle k_obj, py::handle position_ids, py::handle source,
                     std::optional<int64_t> seq_len, const std::string& precision, int64_t unsqueeze_dim, int layout,
                     int direction, std::optional<int64_t> rotary_dim) {
  const TensorArg q = ReadTensor(q_obj, "q");
  std::optional<TensorArg> k;
  if (!k_obj.is_none()) k = ReadTensor(k_obj, "k");
  const py::object ids_obj = AsIndexArray(position_ids);
  const TensorArg ids = ReadTensor(ids_obj, "position_ids");
  const RopePrecision p = ParsePrecision(precision);
  const RopeFrequencies f = FrequenciesFor(source, GatherInts(ids), seq_len);
  const RopeCallOptions o = Options(unsqueeze_dim, layout, direction, rotary_dim);
  CheckWritableInPlace(q);
  if (k) CheckWritableInPlace(*k);
  if (q.numel() + (k ? k->numel() : 0) >= kReleaseGilElements) {
    py::gil_scoped_release release;
    RotateWithPositions(q, k ? &*k : nullptr, ids, f, p, o);
  } else {
    RotateWithPositions(q, k ? &*k : nullptr, ids, f, p, o);
  }
  MarkModifiedInPlace(q);
  if (k) MarkModifiedInPlace(*k);
}

// New tensors (R q, R k) allocated with torch.empty_like (HF's apply_rotary_pos_emb contract), in one call:
// the fast path of posenc.torch.apply_rotary_pos_emb, whose Python-call overhead is what a decode step pays.
// k may be None: then (R q, None).
py::tuple RotateNew(py::handle q_obj, py::handle k_obj, py::handle cos_obj, py::handle sin_obj,
                    int64_t unsqueeze_dim, int layout, int direction) {
  const TensorArg q = ReadTensor(q_obj, "q");
  std::optional<TensorArg> k;
  if (!k_obj.is_none()) k = ReadTensor(k_obj, "k");
  const TensorArg cos = ReadTensor(cos_obj, "cos"), sin = ReadTensor(sin_obj, "sin");
  RotationDType(q);  // TypeError before allocating outputs for an input that cannot be rotated
  auto [q_out_obj, q_out] = EmptyLike(q, "q_out");
  py::object k_out_obj = py::none();
  std::optional<TensorArg> k_out;
  if (k) {
    RotationDType(*k);
    auto [obj, arg] = EmptyLike(*k, "k_out");
    k_out_obj = std::move(obj);
    k_out = std::move(arg);
  }
  const RopeCallOptions o = Options(unsqueeze_dim, layout, direction, std::nullopt);
  const auto run = [&] {
    RotateWithTable(q, k ? &*k : nullptr, &q_out, k_out ? &*k_out : nullptr, cos, sin, o);
  };
  if (q.numel() + (k ? k->numel() : 0) >= kReleaseGilElements) {
    py::gil_scoped_release release;
    run();
  } else {
    run();
  }
  return py::make_tuple(std::move(q_out_obj), std::move(k_out_obj));
}

// The layout argument of posenc.torch: 'half-split' or 'interleaved'.
int LayoutCode(py::handle layout) {
  if (PyUnicode_Check(layout.ptr())) {
    if (PyUnicode_CompareWithASCIIString(layout.ptr(), "half-split") == 0) return 0;
    if (PyUnicode_CompareWithASCIIString(layout.ptr(), "interleaved") == 0) return 1;
  }
  throw py::value_error("layout must be 'half-split' or 'interleaved', got " + py::repr(layout).cast<std::string>());
}

// posenc.torch.apply_rotary_pos_emb when autograd records nothing and q, k, cos, sin share one dtype (the forward
// of inference, a decode step): new (R q, R k) in one C++ call. None otherwise (the caller takes its autograd or
// type-promotion path).
py::object PlainForward(py::handle q_obj, py::handle k_obj, py::handle cos_obj, py::handle sin_obj,
                        int64_t unsqueeze_dim, py::handle layout) {
  const int layout_code = LayoutCode(layout);
  const TensorArg q = ReadTensor(q_obj, "q"), k = ReadTensor(k_obj, "k");
  const TensorArg cos = ReadTensor(cos_obj, "cos"), sin = ReadTensor(sin_obj, "sin");
  if (!q.is_torch || !k.is_torch || !cos.is_torch || !sin.is_torch) {
    throw py::type_error("q, k, cos and sin must be torch tensors (posenc.apply_rope takes NumPy arrays)");
  }
  if (q.elem != k.elem || q.elem != cos.elem || q.elem != sin.elem) return py::none();
  if (NeedsAutograd({&q, &k, &cos, &sin})) return py::none();
  RotationDType(q);  // TypeError before allocating outputs for an input that cannot be rotated
  auto [q_out_obj, q_out] = EmptyLike(q, "q_out");
  auto [k_out_obj, k_out] = EmptyLike(k, "k_out");
  const RopeCallOptions o = Options(unsqueeze_dim, layout_code, 0, std::nullopt);
  if (q.numel() + k.numel() >= kReleaseGilElements) {
    py::gil_scoped_release release;
    RotateWithTable(q, &k, &q_out, &k_out, cos, sin, o);
  } else {
    RotateWithTable(q, &k, &q_out, &k_out, cos, sin, o);
  }
  return py::make_tuple(std::move(q_out_obj), std::move(k_out_obj));
}

// Seconds per call of the C++ side of Rotate (arguments read once, then `iterations` calls): what
// python/bench_rope.py subtracts from a Python call's time to get the Python-call overhead.
double TimeRotate(py::handle q, py::handle k, py::handle cos, py::handle sin, py::handle q_out, py::handle k_out,
                  int64_t unsqueeze_dim, int layout, int64_t iterations) {
  if (iterations < 1) throw py::value_error("iterations must be >= 1, got " + std::to_string(iterations));
  const TableArgs args(q, k, cos, sin, q_out, k_out);
  const RopeCallOptions o = Options(unsqueeze_dim, layout, 0, std::nullopt);
  py::gil_scoped_release release;
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < iterations; ++i) args.Run(o);
  const auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double>(t1 - t0).count() / static_cast<double>(iterations);
}

std::string FrequenciesRepr(const RopeFrequencies& f) {
  return "Frequencies(rotary_dim=" + std::to_string(f.rotary_dim()) + ", attention_factor=" +
         py::repr(py::float_(f.attention_factor)).cast<std::string>() + ", softmax_scale_multiplier=" +
         py::repr(py::float_(f.softmax_scale_multiplier)).cast<std::string>() + ")";
}

template <class T>
py::object Optional(const std::optional<T>& v) {
  return v ? py::cast(*v) : py::none();
}

}  // namespace
}  // namespace posenc::python

PYBIND11_MODULE(_posenc, m) {
  namespace py = pybind11;
  using namespace posenc;
  using namespace posenc::python;
  m.doc() = "Compiled core of the posenc package (use the names re-exported by `posenc` and `posenc.torch`).";
  // Before any OpenMP team: OMP_NUM_THREADS past kMaxThreads would crash libgomp in the first rotation.
  posenc::CheckOpenMpDefaultThreads();

  // posenc.Error and its subclasses; each configuration/shape/range error is also a ValueError, an I/O error an
  // OSError, so callers can catch either family.
  const auto make = [&](const char* name, py::tuple bases) {
    PyObject* type = PyErr_NewException((std::string("posenc.") + name).c_str(), bases.ptr(), nullptr);
    if (type == nullptr) throw py::error_already_set();
    m.add_object(name, py::handle(type));  // the module holds the reference
    return type;
  };
  static PyObject* const error = make("Error", py::make_tuple(py::handle(PyExc_Exception)));
  const auto sub = [&](const char* name, PyObject* family) {
    return make(name, py::make_tuple(py::handle(error), py::handle(family)));
  };
  static PyObject* const config_error = sub("ConfigError", PyExc_ValueError);
  static PyObject* const shape_error = sub("ShapeError", PyExc_ValueError);
  static PyObject* const range_error = sub("RangeError", PyExc_ValueError);
  static PyObject* const io_error = sub("IoError", PyExc_OSError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const ConfigError& e) {
      PyErr_SetString(config_error, e.what());
    } catch (const ShapeError& e) {
      PyErr_SetString(shape_error, e.what());
    } catch (const RangeError& e) {
      PyErr_SetString(range_error, e.what());
    } catch (const IoError& e) {
      PyErr_SetString(io_error, e.what());
    } catch (const Error& e) {
      PyErr_SetString(error, e.what());
    }
  });

  py::class_<RopeFrequencies>(m, "Frequencies",
                              "A frequency table: inv_freq [rotary_dim/2] float32 (radians/token), the attention "
                              "factor multiplying cos and sin, the softmax-scale multiplier.")
      .def_property_readonly("inv_freq", [](const RopeFrequencies& f) { return FloatArray(f.inv_freq); },
                             "inv_freq [rotary_dim/2], float32, radians/token (a new array on each access).")
      .def_readonly("attention_factor", &RopeFrequencies::attention_factor)
      .def_readonly("softmax_scale_multiplier", &RopeFrequencies::softmax_scale_multiplier)
      .def_property_readonly("rotary_dim", &RopeFrequencies::rotary_dim)
      .def("__repr__", &FrequenciesRepr);

  py::class_<PyRopeConfig>(m, "RopeConfig",
                           "The rotary embedding of a Hugging Face config: rope type and parameters (validated), "
                           "head_dim, rotary_dim and channel layout. Build it with RopeConfig.from_hf.")
      .def_static("from_hf", &ConfigFromHf, py::arg("config"),
                  "From a config.json dict, a path to a config.json, or a transformers PretrainedConfig (anything "
                  "with to_dict()), with transformers v5 semantics (rope_parameters or rope_scaling; head_dim, "
                  "partial_rotary_factor). Raises posenc.ConfigError (a ValueError) naming the field and value.")
      .def_static("from_json", &ConfigFromJsonText, py::arg("text"), "From the text of a config.json.")
      .def_property_readonly("rope_type", [](const PyRopeConfig& c) {
        return std::string(RopeTypeName(c.hf.params.rope_type));
      })
      .def_property_readonly("layout", [](const PyRopeConfig& c) { return std::string(RopeLayoutName(c.hf.layout)); },
                             "'half-split' (pairs (i, i + rotary_dim/2), HF) or 'interleaved' ((2i, 2i+1)).")
      .def_property_readonly("head_dim", [](const PyRopeConfig& c) { return c.hf.params.head_dim; })
      .def_property_readonly("rotary_dim", [](const PyRopeConfig& c) { return c.hf.params.RotaryDim(); },
                             "Rotated channels per head (head_dim * partial_rotary_factor).")
      .def_property_readonly("rope_theta", [](const PyRopeConfig& c) { return c.hf.params.rope_theta; })
      .def_property_readonly("max_position_embeddings",
                             [](const PyRopeConfig& c) { return c.hf.params.max_position_embeddings; })
      .def_property_readonly("original_max_position_embeddings", [](const PyRopeConfig& c) {
        return Optional(c.hf.params.original_max_position_embeddings);
      })
      .def_property_readonly("factor", [](const PyRopeConfig& c) { return Optional(c.hf.params.factor); })
      .def_property_readonly("warnings", [](const PyRopeConfig& c) { return c.hf.warnings; },
                             "Keys present but unused by this rope type, and defaults that were applied.")
      .def_property_readonly("inv_freq", [](const PyRopeConfig& c) { return FloatArray(c.init.inv_freq); },
                             "inv_freq [rotary_dim/2] float32 at init (HF's init: dynamic's base table, "
                             "longrope's short factors), radians/token.")
      .def_property_readonly("attention_factor", [](const PyRopeConfig& c) { return c.init.attention_factor; },
                             "Multiplies cos and sin (yarn, longrope; 1 otherwise): HF's attention_scaling.")
      .def_property_readonly("softmax_scale_multiplier",
                             [](const PyRopeConfig& c) { return c.init.softmax_scale_multiplier; },
                             "Multiplies head_dim**-0.5 in attention (DeepSeek yarn mscale_all_dim; 1 otherwise).")
      .def("frequencies",
           [](const PyRopeConfig& c, std::optional<int64_t> seq_len) {
             if (seq_len && *seq_len < 1) {
               throw py::value_error("seq_len must be >= 1, got " + std::to_string(*seq_len));
             }
             return ComputeRopeFrequencies(c.hf.params, seq_len);
           },
           py::arg("seq_len") = py::none(),
           "The table for a sequence of seq_len tokens (dynamic: NTK base grown past max_position_embeddings; "
           "longrope: long factors past original_max_position_embeddings); None: the init table. Stateless.")
      .def("__repr__", [](const PyRopeConfig& c) {
        return "RopeConfig(rope_type='" + std::string(RopeTypeName(c.hf.params.rope_type)) + "', head_dim=" +
               std::to_string(c.hf.params.head_dim) + ", rotary_dim=" + std::to_string(c.hf.params.RotaryDim()) +
               ", layout='" + RopeLayoutName(c.hf.layout) + "')";
      });

  py::class_<HfDynamicRopeState>(m, "HfDynamicRopeState",
                                 "Hugging Face's stateful dynamic_rope_update for rope types dynamic and longrope: "
                                 "the table grows with the longest sequence seen and resets below "
                                 "max_position_embeddings (dynamic), or switches long/short per call (longrope).")
      .def(py::init([](const PyRopeConfig& c) { return HfDynamicRopeState(c.hf.params); }), py::arg("config"))
      .def("update", &HfDynamicRopeState::Update, py::arg("seq_len"),
           "Applies one call's update (seq_len = max(position_ids) + 1) and returns the Frequencies it uses.")
      .def_property_readonly("frequencies", &HfDynamicRopeState::frequencies)
      .def_property_readonly("max_seq_len_cached", &HfDynamicRopeState::max_seq_len_cached);

  m.def("cos_sin", &CosSin, py::arg("config"), py::arg("position_ids"), py::arg("precision") = "exact",
        py::arg("seq_len") = py::none(),
        "(cos, sin) for position_ids, each of shape position_ids.shape + (rotary_dim,), float32 NumPy arrays laid out "
        "as Hugging Face returns them: cat(freqs, freqs) along the last axis, attention factor folded in. "
        "config: a RopeConfig (its table at seq_len, default max(position_ids) + 1, what a fresh HF module uses) or "
        "Frequencies. precision 'exact' (within 1 ulp of the true values) or 'hf' (HF's float32 angle).");
  m.def("_rotate", &Rotate, py::arg("q"), py::arg("k"), py::arg("cos"), py::arg("sin"), py::arg("q_out"),
        py::arg("k_out"), py::arg("unsqueeze_dim"), py::arg("layout"), py::arg("direction"), py::arg("rotary_dim"));
  m.def("_rotate_new", &RotateNew, py::arg("q"), py::arg("k"), py::arg("cos"), py::arg("sin"),
        py::arg("unsqueeze_dim"), py::arg("layout"), py::arg("direction"));
  m.def("_plain_forward", &PlainForward, py::arg("q"), py::arg("k"), py::arg("cos"), py::arg("sin"),
        py::arg("unsqueeze_dim"), py::arg("layout"));
  m.def("_rotate_positions", &RotatePositions, py::arg("q"), py::arg("k"), py::arg("position_ids"),
        py::arg("config"), py::arg("seq_len"), py::arg("precision"), py::arg("unsqueeze_dim"), py::arg("layout"),
        py::arg("direction"), py::arg("rotary_dim"));
  m.def("_time_rotate", &TimeRotate, py::arg("q"), py::arg("k"), py::arg("cos"), py::arg("sin"), py::arg("q_out"),
        py::arg("k_out"), py::arg("unsqueeze_dim"), py::arg("layout"), py::arg("iterations"));
  m.def("kernel_target", [] { return std::string(kernels::RopeKernelTargetName()); },
        "The Highway target the rotation kernel runs on this CPU (e.g. 'AVX2').");
  m.def("openmp_max_threads", [] { return omp_get_max_threads(); },
        "OpenMP threads posenc may use (shared with torch's OpenMP: torch.set_num_threads sets both).");
}
