#include "tensor_arg.h"

#include <pybind11/numpy.h>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include <algorithm>
#include <string>

namespace posenc::python {
namespace {

// An interned attribute name, created once and kept for the life of the process.
PyObject* Name(const char* s) { return PyUnicode_InternFromString(s); }

py::object GetAttr(py::handle obj, PyObject* name) {
  PyObject* r = PyObject_GetAttr(obj.ptr(), name);
  if (r == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(r);
}

py::object CallMethod(py::handle obj, PyObject* name) {
  PyObject* r = PyObject_CallMethodNoArgs(obj.ptr(), name);
  if (r == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(r);
}

// torch's types and dtype objects, looked up once torch has been imported by the user (never imported here).
struct Torch {
  bool loaded = false;
  PyObject* tensor_type = nullptr;
  PyObject* f32 = nullptr;
  PyObject* bf16 = nullptr;
  PyObject* f16 = nullptr;
  PyObject* f64 = nullptr;
  PyObject* i64 = nullptr;
  PyObject* i32 = nullptr;
  PyObject* strided = nullptr;
  PyObject* is_grad_enabled = nullptr;
  PyObject* is_inference_mode_enabled = nullptr;
  PyObject* empty_like = nullptr;
};

const Torch& GetTorch() {
  static Torch t;
  if (t.loaded) return t;
  PyObject* torch = PyDict_GetItemString(PyImport_GetModuleDict(), "torch");  // borrowed
  if (torch == nullptr) return t;
  auto attr = [&](const char* name) {
    PyObject* r = PyObject_GetAttrString(torch, name);  // new reference, kept for the process lifetime
    if (r == nullptr) throw py::error_already_set();
    return r;
  };
  t.tensor_type = attr("Tensor");
  t.f32 = attr("float32");
  t.bf16 = attr("bfloat16");
  t.f16 = attr("float16");
  t.f64 = attr("float64");
  t.i64 = attr("int64");
  t.i32 = attr("int32");
  t.strided = attr("strided");
  t.is_grad_enabled = attr("is_grad_enabled");
  t.is_inference_mode_enabled = attr("is_inference_mode_enabled");
  t.empty_like = attr("empty_like");
  t.loaded = true;
  return t;
}

Dims IntTuple(py::handle seq, const char* what, const char* name) {
  if (!PyTuple_Check(seq.ptr())) throw py::type_error(std::string(name) + "." + what + " is not a tuple");
  const Py_ssize_t n = PyTuple_GET_SIZE(seq.ptr());
  if (static_cast<size_t>(n) > kMaxDims) {
    throw py::value_error(std::string(name) + " has " + std::to_string(n) + " dimensions; posenc takes at most " +
                          std::to_string(kMaxDims));
  }
  Dims v;
  for (Py_ssize_t i = 0; i < n; ++i) {
    const long long x = PyLong_AsLongLong(PyTuple_GET_ITEM(seq.ptr(), i));
    if (x == -1 && PyErr_Occurred()) throw py::error_already_set();
    v.push_back(x);
  }
  return v;
}

TensorArg ReadTorch(py::handle obj, const char* name, const Torch& torch) {
  static PyObject* const kIsCpu = Name("is_cpu");
  static PyObject* const kDevice = Name("device");
  static PyObject* const kLayout = Name("layout");
  static PyObject* const kDtype = Name("dtype");
  static PyObject* const kShape = Name("shape");
  static PyObject* const kStride = Name("stride");
  static PyObject* const kDataPtr = Name("data_ptr");
  TensorArg t;
  t.name = name;
  t.object = obj;
  t.is_torch = true;
  if (GetAttr(obj, kIsCpu).ptr() != Py_True) {
    throw py::type_error(std::string(name) + " must be a CPU tensor, got a tensor on " +
                         py::str(GetAttr(obj, kDevice)).cast<std::string>() +
                         " (posenc rotates host memory; move it with .cpu())");
  }
  if (GetAttr(obj, kLayout).ptr() != torch.strided) {
    throw py::type_error(std::string(name) + " must be a strided (dense) tensor, got layout " +
                         py::str(GetAttr(obj, kLayout)).cast<std::string>());
  }
  const py::object dtype = GetAttr(obj, kDtype);
  const PyObject* d = dtype.ptr();
  t.elem = d == torch.f32    ? Elem::kF32
           : d == torch.bf16 ? Elem::kBF16
           : d == torch.f16  ? Elem::kF16
           : d == torch.f64  ? Elem::kF64
           : d == torch.i64  ? Elem::kI64
           : d == torch.i32  ? Elem::kI32
                             : Elem::kOther;
  if (t.elem == Elem::kOther) t.dtype_name = py::str(dtype).cast<std::string>();
  t.shape = IntTuple(GetAttr(obj, kShape), "shape", name);
  t.strides = IntTuple(CallMethod(obj, kStride), "stride()", name);
  const unsigned long long ptr = PyLong_AsUnsignedLongLong(CallMethod(obj, kDataPtr).ptr());
  if (PyErr_Occurred()) throw py::error_already_set();
  t.data = reinterpret_cast<void*>(static_cast<uintptr_t>(ptr));
  return t;
}

TensorArg ReadNumpy(py::handle obj, const char* name) {
  const py::array a = py::reinterpret_borrow<py::array>(obj);
  TensorArg t;
  t.name = name;
  t.object = obj;
  const py::dtype dtype = a.dtype();
  const char kind = dtype.kind();
  const auto size = dtype.itemsize();
  const bool native = dtype.attr("isnative").cast<bool>();
  t.elem = !native                       ? Elem::kOther
           : kind == 'f' && size == 4    ? Elem::kF32
           : kind == 'f' && size == 2    ? Elem::kF16
           : kind == 'f' && size == 8    ? Elem::kF64
           : kind == 'i' && size == 8    ? Elem::kI64
           : kind == 'i' && size == 4    ? Elem::kI32
                                         : Elem::kOther;
  t.dtype_name = dtype.attr("name").cast<std::string>();
  t.writable = a.writeable();
  t.data = const_cast<void*>(a.data());
  if (static_cast<size_t>(a.ndim()) > kMaxDims) {
    throw py::value_error(std::string(name) + " has " + std::to_string(a.ndim()) +
                          " dimensions; posenc takes at most " + std::to_string(kMaxDims));
  }
  for (py::ssize_t i = 0; i < a.ndim(); ++i) {
    t.shape.push_back(a.shape(i));
    const py::ssize_t bytes = a.strides(i);
    if (bytes % size != 0) {
      throw py::value_error(std::string(name) + " has a stride of " + std::to_string(bytes) + " bytes in dimension " +
                            std::to_string(i) + ", not a whole number of " + std::to_string(size) +
                            "-byte elements");
    }
    t.strides.push_back(bytes / size);
  }
  return t;
}

const char* ElemName(Elem e) {
  switch (e) {
    case Elem::kF32: return "float32";
    case Elem::kBF16: return "bfloat16";
    case Elem::kF16: return "float16";
    case Elem::kF64: return "float64";
    case Elem::kI64: return "int64";
    case Elem::kI32: return "int32";
    case Elem::kOther: break;
  }
  return "unsupported";
}

}  // namespace

int64_t TensorArg::numel() const {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

std::string TensorArg::ShapeString() const {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

bool IsTorchTensor(py::handle object) {
  const Torch& torch = GetTorch();
  if (!torch.loaded) return false;
  const int r = PyObject_IsInstance(object.ptr(), torch.tensor_type);
  if (r < 0) throw py::error_already_set();
  return r == 1;
}

// An empty array addresses no element, so its strides say nothing: NumPy gives every dimension of
// np.empty((1, 4, 0, 8)) stride 0. Such an argument gets row-major strides, so the checks meant for arrays
// with elements (a contiguous head_dim) do not refuse a valid empty input.
static TensorArg WithEmptyStridesRowMajor(TensorArg t) {
  if (std::find(t.shape.begin(), t.shape.end(), 0) == t.shape.end()) return t;
  int64_t stride = 1;
  for (size_t i = t.shape.size(); i-- > 0;) {
    t.strides[i] = stride;
    stride *= std::max<int64_t>(t.shape[i], 1);
  }
  return t;
}

TensorArg ReadTensor(py::handle object, const char* name) {
  if (IsTorchTensor(object)) return WithEmptyStridesRowMajor(ReadTorch(object, name, GetTorch()));
  if (py::isinstance<py::array>(object)) return WithEmptyStridesRowMajor(ReadNumpy(object, name));
  throw py::type_error(std::string(name) + " must be a NumPy array or a CPU torch tensor, got " +
                       py::str(py::type::of(object).attr("__name__")).cast<std::string>());
}

DType RotationDType(const TensorArg& t) {
  switch (t.elem) {
    case Elem::kF32: return DType::kF32;
    case Elem::kBF16: return DType::kBF16;
    case Elem::kF16: return DType::kF16;
    default: break;
  }
  const std::string got = t.dtype_name.empty() ? ElemName(t.elem) : t.dtype_name;
  throw py::type_error(std::string(t.name) + " must be float32, bfloat16 (torch) or float16, got " + got);
}

void CheckWritableInPlace(const TensorArg& t) {
  if (!t.is_torch) {
    if (!t.writable) throw py::value_error(std::string(t.name) + " is a read-only NumPy array; it is rotated in place");
    return;
  }
  static PyObject* const kRequiresGrad = Name("requires_grad");
  static PyObject* const kIsInference = Name("is_inference");
  const Torch& torch = GetTorch();
  if (GetAttr(t.object, kRequiresGrad).ptr() == Py_True) {
    PyObject* grad = PyObject_CallNoArgs(torch.is_grad_enabled);
    if (grad == nullptr) throw py::error_already_set();
    const bool enabled = grad == Py_True;
    Py_DECREF(grad);
    if (enabled) {
      throw py::value_error(std::string(t.name) + " requires grad: posenc.apply_rope rotates in place outside "
                            "autograd; use posenc.torch.apply_rotary_pos_emb, or call it under torch.no_grad()");
    }
  }
  if (CallMethod(t.object, kIsInference).ptr() == Py_True) {
    PyObject* mode = PyObject_CallNoArgs(torch.is_inference_mode_enabled);
    if (mode == nullptr) throw py::error_already_set();
    const bool enabled = mode == Py_True;
    Py_DECREF(mode);
    if (!enabled) {
      throw py::value_error(std::string(t.name) + " is an inference tensor: torch allows no in-place update of it "
                            "outside torch.inference_mode()");
    }
  }
}

bool NeedsAutograd(std::initializer_list<const TensorArg*> tensors) {
  static PyObject* const kRequiresGrad = Name("requires_grad");
  bool any = false;
  for (const TensorArg* t : tensors) {
    if (t->is_torch && GetAttr(t->object, kRequiresGrad).ptr() == Py_True) any = true;
  }
  if (!any) return false;
  PyObject* grad = PyObject_CallNoArgs(GetTorch().is_grad_enabled);
  if (grad == nullptr) throw py::error_already_set();
  const bool enabled = grad == Py_True;
  Py_DECREF(grad);
  return enabled;
}

void MarkModifiedInPlace(const TensorArg& t) {
  if (!t.is_torch) return;
  static PyObject* const kIsInference = Name("is_inference");
  static PyObject* const kSet = Name("set_");
  if (CallMethod(t.object, kIsInference).ptr() == Py_True) return;  // inference tensors have no version counter
  PyObject* r = PyObject_CallMethodOneArg(t.object.ptr(), kSet, t.object.ptr());  // x.set_(x): bumps _version
  if (r == nullptr) throw py::error_already_set();
  Py_DECREF(r);
}

void AdviseHugePages(void* data, int64_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  if (bytes < kMinHugePageAdviceBytes) return;
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(data) + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + static_cast<uintptr_t>(bytes)) & ~(kHuge - 1);
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);  // advice: errors ignored
#else
  (void)data;
  (void)bytes;
#endif
}

std::pair<py::object, TensorArg> EmptyLike(const TensorArg& like, const char* name) {
  static PyObject* const kStride = Name("stride");
  static PyObject* const kDataPtr = Name("data_ptr");
  if (!like.is_torch) throw py::type_error(std::string(like.name) + " must be a torch tensor here");
  PyObject* r = PyObject_CallOneArg(GetTorch().empty_like, like.object.ptr());
  if (r == nullptr) throw py::error_already_set();
  py::object out = py::reinterpret_steal<py::object>(r);
  TensorArg t = like;  // empty_like of a CPU strided tensor: same device, layout, dtype and shape
  t.name = name;
  t.object = out;
  t.writable = true;
  // empty_like keeps a row-major input's strides (those of its size-1 dimensions address nothing); others are read
  bool row_major = true;
  int64_t expected = 1;
  for (size_t i = like.shape.size(); i > 0; --i) {
    if (like.shape[i - 1] != 1 && like.strides[i - 1] != expected) row_major = false;
    expected *= like.shape[i - 1];
  }
  if (!row_major) t.strides = IntTuple(CallMethod(out, kStride), "stride()", name);
  const unsigned long long ptr = PyLong_AsUnsignedLongLong(CallMethod(out, kDataPtr).ptr());
  if (PyErr_Occurred()) throw py::error_already_set();
  t.data = reinterpret_cast<void*>(static_cast<uintptr_t>(ptr));
  AdviseHugePages(t.data, t.numel() * DTypeSize(RotationDType(t)));
  return {std::move(out), std::move(t)};
}

}  // namespace posenc::python
