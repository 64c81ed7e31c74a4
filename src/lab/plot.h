// Line charts as self-contained SVG files: no plotting library, opens in any browser.
#pragma once
#include <string>
#include <vector>

struct Series {
  std::string label;         // its legend entry; empty: drawn but not listed
  std::vector<double> x, y;  // same length; NaN y values are skipped (a gap in the line)
  int colour = -1;           // index into the palette; −1 = the series' own index
  bool dashed = false;       // e.g. a baseline drawn in the colour of the run it is compared with
  std::vector<double> err = {};  // empty, or one per point: an error bar from y − err to y + err (e.g. the sd over seeds)
};

struct Chart {
  std::string title, x_label, y_label;
  std::vector<Series> series;
  bool log_x = false;  // x on a log₁₀ scale (every x must then be > 0; others are skipped), ticks at 1, 2, 5 × 10ᵏ
};

std::string render_svg(const Chart& chart);
