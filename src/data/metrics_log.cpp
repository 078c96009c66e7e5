#include "cujax/metrics_log.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "cujax/core/error.h"

namespace cujax::metrics_log {

namespace {

std::string shortest(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string fixed(double v, int digits = 2) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// Tick label: six significant digits hide the rounding of k * step (0.30000000000000004).
std::string tick_label(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// An axis over [lo, hi] rounded out to multiples of a 1-2-5 step giving about 5 intervals.
struct Axis {
  double lo, hi, step;
};

Axis nice_axis(double lo, double hi) {
  if (lo == hi) {  // one value: center it in a unit-wide (or value-wide) span
    const double pad = lo == 0.0 ? 1.0 : std::abs(lo) * 0.5;
    lo -= pad;
    hi += pad;
  }
  const double raw = (hi - lo) / 5.0;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double r = raw / mag;
  const double step = (r <= 1.0 ? 1.0 : r <= 2.0 ? 2.0 : r <= 5.0 ? 5.0 : 10.0) * mag;
  return {std::floor(lo / step) * step, std::ceil(hi / step) * step, step};
}

const char* const kColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c"};

}  // namespace

void write_csv(const std::string& path, const std::vector<std::string>& column_names,
               const std::vector<std::vector<double>>& rows) {
  if (column_names.empty()) throw Error("write_csv '" + path + "': no columns");
  std::string out;
  for (size_t c = 0; c < column_names.size(); ++c)
    out += (c ? "," : "") + csv_field(column_names[c]);
  out += "\n";
  for (size_t r = 0; r < rows.size(); ++r) {
    if (rows[r].size() != column_names.size())
      throw Error("write_csv '" + path + "': row " + std::to_string(r) + " has " +
                  std::to_string(rows[r].size()) + " values for " +
                  std::to_string(column_names.size()) + " columns");
    for (size_t c = 0; c < rows[r].size(); ++c) out += (c ? "," : "") + shortest(rows[r][c]);
    out += "\n";
  }
  write_file_atomic(path, out);
}

void write_svg_line_chart(const std::string& path, const std::string& title,
                          const std::string& x_label, const std::string& y_label,
                          const std::vector<Series>& series) {
  if (series.empty() || series.size() > 3)
    throw Error("write_svg_line_chart '" + path + "': " + std::to_string(series.size()) +
                " series; a chart draws 1 to 3");
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  for (const Series& s : series)
    for (auto [x, y] : s.points)
      if (std::isfinite(x) && std::isfinite(y)) {
        x0 = std::min(x0, x), x1 = std::max(x1, x);
        y0 = std::min(y0, y), y1 = std::max(y1, y);
      }
  if (!(x0 <= x1))
    throw Error("write_svg_line_chart '" + path + "': no series has a finite point to draw");
  const Axis ax = nice_axis(x0, x1), ay = nice_axis(y0, y1);

  const double W = 720, H = 440, left = 80, right = 24, top = 48, bottom = 64;
  const double pw = W - left - right, ph = H - top - bottom;
  auto px = [&](double x) { return left + (x - ax.lo) / (ax.hi - ax.lo) * pw; };
  auto py = [&](double y) { return top + ph - (y - ay.lo) / (ay.hi - ay.lo) * ph; };

  std::string o;
  o += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + fixed(W, 0) + "\" height=\"" +
       fixed(H, 0) + "\" viewBox=\"0 0 " + fixed(W, 0) + " " + fixed(H, 0) +
       "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  o += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  o += "<text x=\"" + fixed(W / 2) + "\" y=\"28\" text-anchor=\"middle\" font-size=\"16\">" +
       xml_escape(title) + "</text>\n";

  // Grid lines and tick labels; k * step (not repeated addition) keeps ticks exact.
  const long nx = std::lround((ax.hi - ax.lo) / ax.step),
             ny = std::lround((ay.hi - ay.lo) / ay.step);
  for (long k = 0; k <= nx; ++k) {
    double v = ax.lo + k * ax.step;
    if (std::abs(v) < ax.step * 1e-9) v = 0.0;
    const std::string x = fixed(px(v));
    o += "<line x1=\"" + x + "\" y1=\"" + fixed(top) + "\" x2=\"" + x + "\" y2=\"" +
         fixed(top + ph + 5) + "\" stroke=\"#ddd\"/>\n";
    o += "<text x=\"" + x + "\" y=\"" + fixed(top + ph + 20) + "\" text-anchor=\"middle\">" +
         tick_label(v) + "</text>\n";
  }
  for (long k = 0; k <= ny; ++k) {
    double v = ay.lo + k * ay.step;
    if (std::abs(v) < ay.step * 1e-9) v = 0.0;
    const std::string y = fixed(py(v));
    o += "<line x1=\"" + fixed(left - 5) + "\" y1=\"" + y + "\" x2=\"" + fixed(left + pw) +
         "\" y2=\"" + y + "\" stroke=\"#ddd\"/>\n";
    o += "<text x=\"" + fixed(left - 8) + "\" y=\"" + fixed(py(v) + 4) + "\" text-anchor=\"end\">" +
         tick_label(v) + "</text>\n";
  }
  // Axes over the grid.
  o += "<rect x=\"" + fixed(left) + "\" y=\"" + fixed(top) + "\" width=\"" + fixed(pw) +
       "\" height=\"" + fixed(ph) + "\" fill=\"none\" stroke=\"black\"/>\n";
  o += "<text x=\"" + fixed(left + pw / 2) + "\" y=\"" + fixed(H - 16) +
       "\" text-anchor=\"middle\">" + xml_escape(x_label) + "</text>\n";
  o += "<text transform=\"translate(20," + fixed(top + ph / 2) +
       ") rotate(-90)\" text-anchor=\"middle\">" + xml_escape(y_label) + "</text>\n";

  for (size_t i = 0; i < series.size(); ++i) {
    std::string pts, marks;
    for (auto [x, y] : series[i].points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      pts += (pts.empty() ? "" : " ") + fixed(px(x)) + "," + fixed(py(y));
      if (series[i].points.size() <= 50)
        marks += "<circle cx=\"" + fixed(px(x)) + "\" cy=\"" + fixed(py(y)) +
                 "\" r=\"2.5\" fill=\"" + kColors[i] + "\"/>\n";
    }
    o += "<polyline fill=\"none\" stroke=\"" + std::string(kColors[i]) +
         "\" stroke-width=\"1.5\" points=\"" + pts + "\"/>\n" + marks;
  }

  // Legend in the top-right corner of the plot, one row per series.
  size_t longest = 0;
  for (const Series& s : series) longest = std::max(longest, s.name.size());
  const double lw = 40 + 7.0 * static_cast<double>(longest), lh = 8 + 18.0 * series.size();
  const double lx = left + pw - lw - 8, ly = top + 8;
  o += "<rect x=\"" + fixed(lx) + "\" y=\"" + fixed(ly) + "\" width=\"" + fixed(lw) +
       "\" height=\"" + fixed(lh) + "\" fill=\"white\" fill-opacity=\"0.85\" stroke=\"#999\"/>\n";
  for (size_t i = 0; i < series.size(); ++i) {
    const double y = ly + 16 + 18.0 * i;
    o += "<line x1=\"" + fixed(lx + 8) + "\" y1=\"" + fixed(y - 4) + "\" x2=\"" + fixed(lx + 28) +
         "\" y2=\"" + fixed(y - 4) + "\" stroke=\"" + kColors[i] + "\" stroke-width=\"2\"/>\n";
    o += "<text x=\"" + fixed(lx + 34) + "\" y=\"" + fixed(y) + "\">" + xml_escape(series[i].name) +
         "</text>\n";
  }
  o += "</svg>\n";
  write_file_atomic(path, o);
}

}  // namespace cujax::metrics_log
