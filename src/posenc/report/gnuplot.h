// PNG plots through gnuplot, run as an external program (never linked): the one gnuplot runner of the eval
// and demo plots. A missing gnuplot is reported by
// GnuplotPath() returning nothing, so callers can say so and carry on; the plotting calls themselves throw.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace posenc {

/// The gnuplot executable on PATH (the first directory holding an executable "gnuplot"), or std::nullopt.
std::optional<std::filesystem::path> GnuplotPath();

/// The message shown when gnuplot is missing: names the program and the Debian package to install.
std::string GnuplotMissingMessage();

/// The PNG terminal this gnuplot offers: "pngcairo" if it accepts `set terminal pngcairo`, else "png"
/// (libgd). Probed once per process.
/// Errors: posenc::IoError if gnuplot is missing or accepts neither terminal.
std::string GnuplotPngTerminal();

/// One inline data block of a gnuplot script: `$name << EOD` ... `EOD`, one text line per row.
struct GnuplotData {
  std::string name;                // without the leading '$'
  std::vector<std::string> lines;  // whitespace-separated columns (or a matrix row for `matrix`)
};

/// Writes `png` (width x height pixels) by running gnuplot on: the data blocks, then
/// `set terminal <GnuplotPngTerminal()> size width,height`, `set output '<png>'`, `body`, `set output`.
/// The script goes to gnuplot's stdin; nothing else is written besides the PNG. The parent directory
/// must exist.
/// Errors: posenc::IoError if gnuplot is missing, exits with a non-zero status (the message gives the
///         status and gnuplot's own error text) or leaves no PNG behind (the message names the path).
void WriteGnuplotPng(const std::filesystem::path& png, int width, int height, const std::vector<GnuplotData>& data,
                     const std::string& body);

/// Creates `dir` (and its parents) if missing. Errors: posenc::IoError naming the path if that fails or
/// it exists and is not a directory.
void EnsurePlotDir(const std::filesystem::path& dir);

/// A single-quoted gnuplot string literal of `text` (a quote inside is doubled, as gnuplot reads it).
std::string GnuplotQuote(const std::string& text);

}  // namespace posenc
