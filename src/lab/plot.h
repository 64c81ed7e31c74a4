// Line charts as self-contained SVG files: no plotting library, opens in any browser.
#pragma once
#include <string>
#include <vector>

struct Series {
  std::string label;
  std::vector<double> x, y;  // same length; NaN y values are skipped (a gap in the line)
};

struct Chart {
  std::string title, x_label, y_label;
  std::vector<Series> series;
};

std::string render_svg(const Chart& chart);
