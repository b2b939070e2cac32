// Exception types thrown by posenc. Every message names the offending field and its value.
#pragma once

#include <stdexcept>
#include <string>

namespace posenc {

/// Base of every posenc exception.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A configuration value that cannot be meaningful (bad factor, odd rotary_dim, unknown rope_type, ...).
/// Message form: "<field> must be <condition>, got <value>".
class ConfigError : public Error {
 public:
  using Error::Error;
};

/// Tensor shapes, strides or sizes that do not fit together (e.g. rotary_dim > head_dim, stride too small).
class ShapeError : public Error {
 public:
  using Error::Error;
};

/// A position id outside what a table or cache covers (negative, or >= its length). Never clamped.
class RangeError : public Error {
 public:
  using Error::Error;
};

/// A file that cannot be read, or whose contents are truncated or inconsistent.
class IoError : public Error {
 public:
  using Error::Error;
};

/// A distributed run that cannot go on: a rank failed or stopped answering, the transport reported an error, or
/// the ranks disagree on their options or model file. The message names the rank(s) involved.
class DistError : public Error {
 public:
  using Error::Error;
};

/// A computation met NaN or infinity (weights, activations, logits, a negative log-likelihood, a training loss or
/// gradient): the result would not be a number worth printing. Message form: "<where>: <what> is <value>", e.g.
/// "layer 0, position 3: query (head 1, channel 5) is nan"; training names the step, the layer and the tensor.
class NumericError : public Error {
 public:
  using Error::Error;
};

}  // namespace posenc
