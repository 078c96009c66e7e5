// cujax::metrics_log: what a training run leaves on disk for people to read: a CSV table of
// metrics and an SVG line chart of them (the loss curves of train and validation loss).
//
//   metrics_log::write_csv("run/metrics.csv", {"step", "train_loss", "val_loss"}, rows);
//   metrics_log::write_svg_line_chart("run/loss.svg", "fortunes, 2 layers", "step", "loss (nats)",
//                                     {{"train", train_points}, {"validation", val_points}});
//
// Every write is atomic: the contents go to a temporary file in the destination's folder, which
// is fsynced and renamed over the destination, so a reader (or a run killed mid-write) sees the
// old file or the new one, never a part. Errors name the file.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cujax::metrics_log {

// Writes `contents` to `path` atomically (see above); the file's mode is 0644.
void write_file_atomic(const std::string& path, std::string_view contents);

// A CSV file (RFC 4180, "\n" line ends): a header of `column_names`, then one line per row.
// Numbers are written in the shortest form that reads back to the same double ("0.1", "100",
// "nan", "inf"); a name with a comma, quote or line break is quoted. Throws naming the file if
// a row's length differs from the header's.
void write_csv(const std::string& path, const std::vector<std::string>& column_names,
               const std::vector<std::vector<double>>& rows);

// One line of a chart: its legend entry and its (x, y) points in drawing order.
struct Series {
  std::string name;
  std::vector<std::pair<double, double>> points;
};

// A self-contained SVG chart of 1 to 3 series on linear axes with ticks, axis labels, a title
// and a legend. The axes span all finite points (rounded out to ticks); points with a NaN or
// infinite coordinate are left out (a diverged loss cannot be drawn). Series with at most 50
// points also get a marker per point, so a sparse validation curve stays visible. Throws naming
// the file for 0 or more than 3 series or when no series has a finite point.
void write_svg_line_chart(const std::string& path, const std::string& title,
                          const std::string& x_label, const std::string& y_label,
                          const std::vector<Series>& series);

}  // namespace cujax::metrics_log
