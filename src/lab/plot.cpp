#include "lab/plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

static std::string escape_xml(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else if (c == '"') out += "&quot;";
    else out += c;
  }
  return out;
}

static std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

// A tick's label: up to 6 significant digits, so that 10000 reads 10000, not 1e+04.
static std::string tick_label(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// "Nice" tick step: 1, 2 or 5 times a power of ten, giving about `count` ticks over `span`.
static double tick_step(double span, int count) {
  const double raw = span / count, power = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0})
    if (raw <= m * power) return m * power;
  return 10 * power;
}

// Ticks over [lo, hi]: multiples of a nice step, or on a log axis 1, 2 and 5 times each power of ten (axis values,
// not their logarithms). A tick within rounding of zero is exactly 0 (never labelled "-0").
static std::vector<double> ticks(double lo, double hi, bool log_scale) {
  std::vector<double> out;
  if (log_scale) {
    for (double power = std::pow(10.0, std::floor(std::log10(lo))); power <= hi; power *= 10)
      for (double m : {1.0, 2.0, 5.0})
        if (m * power >= lo * (1 - 1e-9) && m * power <= hi * (1 + 1e-9)) out.push_back(m * power);
    return out;
  }
  const double step = tick_step(hi - lo, 6);
  for (double t = std::ceil(lo / step) * step; t <= hi + 1e-9 * step; t += step)
    out.push_back(std::fabs(t) < 1e-9 * step ? 0.0 : t);
  return out;
}

std::string render_svg(const Chart& chart) {
  // The legend's column is as wide as the longest label needs (about 6.6 px a character at 12 px), at least 180.
  size_t longest = 0;
  for (const Series& s : chart.series) longest = std::max(longest, s.label.size());
  const double right = std::max(180.0, 54 + 6.6 * longest), W = 540 + right, H = 440, left = 70, top = 40, bottom = 55;
  const bool log_x = chart.log_x;
  auto shown = [&](const Series& s, size_t i) { return std::isfinite(s.y[i]) && (!log_x || s.x[i] > 0); };
  auto error = [](const Series& s, size_t i) { return i < s.err.size() && std::isfinite(s.err[i]) ? s.err[i] : 0.0; };
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  for (const Series& s : chart.series)
    for (size_t i = 0; i < s.x.size(); i++)
      if (shown(s, i)) {
        x0 = std::min(x0, s.x[i]), x1 = std::max(x1, s.x[i]);
        y0 = std::min(y0, s.y[i] - error(s, i)), y1 = std::max(y1, s.y[i] + error(s, i));
      }
  if (!(x0 < x1)) x0 = log_x ? x0 / 2 : x0 - 1, x1 = log_x ? x0 * 4 : x0 + 2;
  if (!(y0 < y1)) y0 = y0 - 1, y1 = y0 + 2;
  const double pad = 0.05 * (y1 - y0);
  y0 -= pad, y1 += pad;
  // A little room left and right too, so that the first and last points' error bars stand clear of the frame: 3% of
  // the span, in the axis' own units (decades on a log axis).
  if (log_x) {
    const double room = std::pow(x1 / x0, 0.03);
    x0 /= room;
    x1 *= room;
  } else {
    const double room = 0.03 * (x1 - x0);
    x0 -= room;
    x1 += room;
  }
  auto axis = [&](double x) { return log_x ? std::log10(x) : x; };
  auto px = [&](double x) { return left + (axis(x) - axis(x0)) / (axis(x1) - axis(x0)) * (W - left - right); };
  auto py = [&](double y) { return H - bottom - (y - y0) / (y1 - y0) * (H - top - bottom); };

  const char* colours[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"};
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + number(W) + "\" height=\"" + number(H) +
                    "\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" "
                    "fill=\"white\"/>\n";
  svg += "<text x=\"" + number(W / 2) + "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">" +
         escape_xml(chart.title) + "</text>\n";
  // Axes with grid lines at nice ticks.
  for (double t : ticks(x0, x1, log_x))
    svg += "<line x1=\"" + number(px(t)) + "\" y1=\"" + number(top) + "\" x2=\"" + number(px(t)) + "\" y2=\"" +
           number(H - bottom) + "\" stroke=\"#eee\"/><text x=\"" + number(px(t)) + "\" y=\"" + number(H - bottom + 16) +
           "\" text-anchor=\"middle\">" + tick_label(t) + "</text>\n";
  for (double t : ticks(y0, y1, false))
    svg += "<line x1=\"" + number(left) + "\" y1=\"" + number(py(t)) + "\" x2=\"" + number(W - right) + "\" y2=\"" +
           number(py(t)) + "\" stroke=\"#eee\"/><text x=\"" + number(left - 6) + "\" y=\"" + number(py(t) + 4) +
           "\" text-anchor=\"end\">" + tick_label(t) + "</text>\n";
  svg += "<rect x=\"" + number(left) + "\" y=\"" + number(top) + "\" width=\"" + number(W - left - right) +
         "\" height=\"" + number(H - top - bottom) + "\" fill=\"none\" stroke=\"#444\"/>\n";
  svg += "<text x=\"" + number((left + W - right) / 2) + "\" y=\"" + number(H - 12) + "\" text-anchor=\"middle\">" +
         escape_xml(chart.x_label) + "</text>\n";
  svg += "<text transform=\"translate(18," + number((top + H - bottom) / 2) +
         ") rotate(-90)\" text-anchor=\"middle\">" + escape_xml(chart.y_label) + "</text>\n";
  int legend_rows = 0;
  for (size_t k = 0; k < chart.series.size(); k++) {
    const Series& s = chart.series[k];
    const std::string colour = colours[(s.colour >= 0 ? s.colour : k) % 8];
    const std::string stroke = "stroke=\"" + colour + "\"" + (s.dashed ? " stroke-dasharray=\"6 4\"" : "");
    std::string points;
    auto flush = [&] {
      if (!points.empty()) svg += "<polyline fill=\"none\" " + stroke + " stroke-width=\"2\" points=\"" + points + "\"/>\n";
      points.clear();
    };
    for (size_t i = 0; i < s.x.size(); i++) {
      if (!shown(s, i)) {  // a gap: close the current line
        flush();
        continue;
      }
      points += number(px(s.x[i])) + "," + number(py(s.y[i])) + " ";
      if (error(s, i) > 0)  // an error bar: a vertical line from y − err to y + err
        svg += "<line x1=\"" + number(px(s.x[i])) + "\" y1=\"" + number(py(s.y[i] - error(s, i))) + "\" x2=\"" +
               number(px(s.x[i])) + "\" y2=\"" + number(py(s.y[i] + error(s, i))) + "\" stroke=\"" + colour +
               "\" stroke-width=\"1.5\"/>\n";
    }
    flush();
    if (s.label.empty()) continue;  // drawn, not listed: e.g. a second seed in its first seed's colour
    const double ly = top + 10 + 20 * legend_rows++;
    svg += "<line x1=\"" + number(W - right + 12) + "\" y1=\"" + number(ly) + "\" x2=\"" + number(W - right + 36) +
           "\" y2=\"" + number(ly) + "\" " + stroke + " stroke-width=\"3\"/><text x=\"" +
           number(W - right + 42) + "\" y=\"" + number(ly + 4) + "\">" + escape_xml(s.label) + "</text>\n";
  }
  return svg + "</svg>\n";
}
