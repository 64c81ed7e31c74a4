// A settings table: each setting of a program declared once, in one row, the way gpt_tensor_table declares each
// tensor once. One row gives the setting's name in a checkpoint's JSON, its command-line flag, its help line,
// the field of the settings struct it lives in, the range of values it accepts and whether it is part of a run
// (stored, fixed on --resume), a knob of a run (stored, may change on --resume) or of this invocation only.
// The functions below walk the table for every use:
//   add_flags        the cxxopts flags and --help (each line ends with the default, from a default struct)
//   apply_flags      copies the flags the user gave into the struct
//   settings_to_json the JSON a checkpoint stores
//   settings_from_json reads it back: type and range checked, naming the key and the file; a key the file lacks
//                    (a setting newer than the file) keeps its default (or the row's `absent` value), and is
//                    listed so the caller can say so; a key stored under its row's old_key (a renamed setting)
//                    is read under it, and noted
//   check_ranges     refuses a value outside its row's range, naming the flag
// The settings struct still declares each field with its default (C++ needs the typed field); the table row says
// everything else. See src/model/config.cpp (the model), src/train/train_config.cpp (./train) and
// src/generate/sampling.cpp (./sample).
#pragma once
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cxxopts.hpp>
#include <functional>
#include <initializer_list>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

// The field of a settings struct that a row sets.
using SettingField = std::variant<int*, float*, bool*, uint64_t*, std::string*>;

// The values a number may take: [lo, hi], either end open or unbounded. `note` is appended to the message.
struct Range {
  double lo = -INFINITY, hi = INFINITY;
  bool lo_open = false, hi_open = false;
  const char* note = "";
};
inline Range any_value() { return {}; }
inline Range at_least(double lo, const char* note = "") { return {lo, INFINITY, false, false, note}; }
inline Range positive(const char* note = "") { return {0, INFINITY, true, false, note}; }
inline Range between(double lo, double hi, bool lo_open, bool hi_open) { return {lo, hi, lo_open, hi_open, ""}; }

enum class Scope {
  Run,         // stored in the checkpoint; a resumed run keeps it (changing it would change what is computed)
  Knob,        // stored in the checkpoint; a resumed run may change it (paths, step count, logging, threads)
  Invocation,  // this invocation only: not stored
};

template <typename Config>
struct Setting {
  const char* key;   // name in the checkpoint's JSON; null: not stored (a flag-only alias, or Scope::Invocation)
  const char* flag;  // command-line flag without "--"; null: no flag (a value the program sets, e.g. vocab_size)
  const char* help;
  std::function<SettingField(Config&)> field;  // where the value lives: see SETTING_FIELD
  Range range;
  Scope scope;
  // What a checkpoint without this key meant, as JSON, when that differs from the default (a setting whose default
  // changed after it was added: files from before it kept the old behaviour). Null: the default.
  const char* absent = nullptr;
  // The key this setting was stored under before it was renamed: files written then still load (the value read
  // under the old key, and a note saying what it became); a file holding both keys is refused. Null: never renamed.
  const char* old_key = nullptr;
};

// Whether `config` stores the setting `key` at all. Every setting, unless a settings struct says otherwise by an
// overload of its own (ModelConfig's, model/config.h: a mixer kind's settings only when a layer is of the kind). A
// file without such a key loads it as the row's `absent` or the default, and does not count it as missing.
template <typename Config>
bool setting_stored(const char* key, const Config& config) {
  return true;
}

// The rows of a nested settings struct (TrainConfig::model's ModelConfig rows), as rows of the outer struct: each
// setting is still declared once, in the inner struct's table.
template <typename Outer, typename Inner>
std::vector<Setting<Outer>> nested_settings(const std::vector<Setting<Inner>>& rows, Inner Outer::*member) {
  std::vector<Setting<Outer>> out;
  for (const Setting<Inner>& r : rows)
    out.push_back({r.key, r.flag, r.help, [field = r.field, member](Outer& o) { return field(o.*member); }, r.range,
                   r.scope, r.absent, r.old_key});
  return out;
}

// The accessor of a row: SETTING_FIELD(TrainConfig, adamw.lr) is a function from a TrainConfig to &config.adamw.lr.
#define SETTING_FIELD(Config, member) [](Config & c) -> SettingField { return &c.member; }

namespace settings_detail {

inline std::string number_text(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

// A float as JSON: the shortest decimal that reads back as the same float (0.9, not 0.8999999761581421, which is
// that float widened to double and printed to double's precision).
inline nlohmann::json float_json(float x) {
  char buf[32];
  for (int digits = 6; digits <= 9; digits++) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, x);
    if (std::strtof(buf, nullptr) == x) break;
  }
  return nlohmann::json::parse(buf);
}

// "must be positive", "must be ≥ 0", "must be in [0, 1)".
inline std::string range_text(const Range& r) {
  if (std::isinf(r.lo) && std::isinf(r.hi)) return "";
  if (std::isinf(r.hi)) {
    if (r.lo == 0 && r.lo_open) return "must be positive";
    return std::string("must be ") + (r.lo_open ? "> " : "≥ ") + number_text(r.lo);
  }
  return "must be in " + std::string(r.lo_open ? "(" : "[") + number_text(r.lo) + ", " + number_text(r.hi) +
         (r.hi_open ? ")" : "]");
}

// A number setting is never meaningfully NaN or infinite, whatever its range.
inline bool in_range(const Range& r, double x) {
  if (!std::isfinite(x)) return false;
  const bool above = r.lo_open ? x > r.lo : x >= r.lo;
  const bool below = r.hi_open ? x < r.hi : x <= r.hi;
  return above && below;
}

template <typename T>
std::string value_text(const T& v) {
  if constexpr (std::is_same_v<T, std::string>) return "'" + v + "'";
  else if constexpr (std::is_same_v<T, bool>) return v ? "true" : "false";
  else if constexpr (std::is_floating_point_v<T>) return number_text(v);
  else return std::to_string(v);
}

template <typename T>
std::string help_text(const T& v) {
  if constexpr (std::is_same_v<T, std::string>) return v;
  else return value_text(v);
}

// Reads one JSON value into a field of type T, refusing values T cannot hold: nlohmann converts 4e19 to int by a
// plain cast, which is undefined behaviour, and a corrupt checkpoint must not reach that.
template <typename T>
void read_json_value(const nlohmann::json& v, const char* key, T& out) {
  if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, std::string>) {
    out = v.get<T>();
  } else {
    if (!v.is_number()) throw std::runtime_error(std::string("'") + key + "' is not a number");
    bool fits;
    if constexpr (std::is_integral_v<T>) {  // compared as integers: doubles round near 2^63
      if (v.is_number_unsigned()) fits = v.get<uint64_t>() <= uint64_t(std::numeric_limits<T>::max());
      else if (v.is_number_integer())
        fits = std::is_signed_v<T> ? v.get<int64_t>() >= int64_t(std::numeric_limits<T>::lowest()) &&
                                         v.get<int64_t>() <= int64_t(std::numeric_limits<T>::max())
                                   : v.get<int64_t>() >= 0;
      else fits = false;  // 2.5 or 4e19 for a count
    } else {
      const double x = v.get<double>();
      fits = std::isfinite(x) && std::fabs(x) <= double(std::numeric_limits<T>::max());
    }
    if (!fits) throw std::runtime_error(std::string("'") + key + "' = " + v.dump() + " is out of range");
    out = v.get<T>();
  }
}

// cxxopts reads an integer flag into its type with an overflow check that multiplication can slip past, so
// "--steps 5000000000" became 705032704. The text as given is read again here in 128 bits (decimal, or hex with
// 0x, as cxxopts accepts) and compared with T's range before the narrowed value is used.
// The message names what is allowed: the type's range narrowed by the setting's own (--steps ≥ 0 says "between 0
// and 2147483647", never "-2147483648").
template <typename T>
void check_integer_flag(const std::string& flag, const std::string& text, const Range& range = {}) {
  size_t i = 0;
  const bool negative = !text.empty() && text[0] == '-';
  if (negative || (!text.empty() && text[0] == '+')) i = 1;
  unsigned base = 10;
  if (text.compare(i, 2, "0x") == 0 || text.compare(i, 2, "0X") == 0) base = 16, i += 2;
  unsigned __int128 magnitude = 0;
  bool too_long = false;
  for (; i < text.size(); i++) {
    const int digit = std::isdigit((unsigned char)text[i]) ? text[i] - '0'
                      : base == 16 && std::isxdigit((unsigned char)text[i]) ? std::tolower(text[i]) - 'a' + 10 : -1;
    if (digit < 0) return;  // not a number at all: cxxopts has refused it already
    magnitude = magnitude * base + unsigned(digit);
    too_long = too_long || magnitude > (unsigned __int128)(uint64_t(-1));
  }
  const bool fits = !too_long && (negative ? magnitude <= (unsigned __int128)(-(__int128)std::numeric_limits<T>::lowest())
                                           : magnitude <= (unsigned __int128)std::numeric_limits<T>::max());
  if (!fits) {
    long double lo = (long double)std::numeric_limits<T>::lowest(), hi = (long double)std::numeric_limits<T>::max();
    if (range.lo > lo) lo = range.lo_open ? std::floor((long double)range.lo) + 1 : std::ceil((long double)range.lo);
    if (range.hi < hi) hi = range.hi_open ? std::ceil((long double)range.hi) - 1 : std::floor((long double)range.hi);
    char bounds[96];
    std::snprintf(bounds, sizeof bounds, "between %.0Lf and %.0Lf", lo, hi);
    throw std::runtime_error(flag + " " + text + " is out of range: it must be " + bounds);
  }
}

}  // namespace settings_detail

// The rows of `table` with these keys, in that order: a program that shares some of ./train's settings (an
// experiment's --lr, --n-head, …) takes their rows, so the flags, help lines and ranges stay ./train's own.
template <typename Config>
std::vector<Setting<Config>> select_settings(const std::vector<Setting<Config>>& table,
                                             std::initializer_list<const char*> keys) {
  std::vector<Setting<Config>> out;
  for (const char* key : keys) {
    const size_t before = out.size();
    for (const Setting<Config>& s : table)
      if (s.key && std::string(s.key) == key) out.push_back(s);
    if (out.size() == before) throw std::logic_error(std::string("no setting '") + key + "'");
  }
  return out;
}

// "--lr", or "-n" for a one-letter flag (cxxopts makes those short options).
inline std::string flag_text(const char* flag) { return (flag[1] ? "--" : "-") + std::string(flag); }

// One flag per row; the help line ends with the row's value in `defaults`.
template <typename Config>
void add_flags(cxxopts::Options& options, const std::vector<Setting<Config>>& table, const Config& defaults) {
  Config d = defaults;
  for (const Setting<Config>& s : table)
    if (s.flag) std::visit(
        [&](auto* field) {
          using T = std::remove_pointer_t<decltype(field)>;
          std::string help = s.help;
          if constexpr (std::is_same_v<T, bool>) {
            options.add_options()(s.flag, help);  // a switch: present = true
          } else {
            bool shown = true;
            if constexpr (std::is_same_v<T, std::string>) shown = !field->empty();
            if (shown) help += " (default: " + settings_detail::help_text(*field) + ")";
            options.add_options()(s.flag, help, cxxopts::value<T>());
          }
        },
        s.field(d));
}

// Copies every flag the user gave into `config`; the others keep their values. An integer flag out of its type's
// range is refused, naming the flag, instead of wrapping around.
template <typename Config>
void apply_flags(const cxxopts::ParseResult& flags, const std::vector<Setting<Config>>& table, Config& config) {
  for (const Setting<Config>& s : table)
    if (s.flag && flags.count(s.flag))
      std::visit(
          [&](auto* field) {
            using T = std::remove_pointer_t<decltype(field)>;
            if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>)
              for (const cxxopts::KeyValue& given : flags.arguments())
                if (given.key() == s.flag)
                  settings_detail::check_integer_flag<T>(flag_text(s.flag), given.value(), s.range);
            *field = flags[s.flag].template as<T>();
          },
          s.field(config));
}

// options.parse, with cxxopts's "Argument ‘x’ failed to parse" turned into a message that names the flag.
inline cxxopts::ParseResult parse_flags(cxxopts::Options& options, int argc, char** argv) {
  try {
    return options.parse(argc, argv);
  } catch (const cxxopts::exceptions::incorrect_argument_type& e) {
    const std::string what = e.what();
    const size_t open = what.find("\xe2\x80\x98"), close = what.rfind("\xe2\x80\x99");  // ‘ and ’
    const std::string value = open != std::string::npos && close > open ? what.substr(open + 3, close - open - 3) : "";
    // A whole number that cxxopts refused does not fit the flag's type.
    const bool whole = value.find_first_not_of("0123456789", value[0] == '-' ? 1 : 0) == std::string::npos;
    auto refuse = [&](const std::string& flag) {
      return std::runtime_error(whole ? flag + " " + value + " is out of range"
                                      : flag + ": '" + value + "' is not a valid value for it");
    };
    for (int i = 1; i < argc; i++) {
      const std::string arg = argv[i];
      const size_t equals = arg.find('=');
      if (arg[0] == '-' && equals != std::string::npos && arg.substr(equals + 1) == value) throw refuse(arg.substr(0, equals));
      if (i > 1 && arg == value && argv[i - 1][0] == '-') throw refuse(argv[i - 1]);
    }
    throw std::runtime_error(what + " (a flag's value is not of its type)");
  }
}

// "n_layer (--n-layer)", "--stop-at" or "vocab_size": a row as messages name it.
template <typename Config>
std::string setting_name(const Setting<Config>& s) {
  if (!s.flag) return s.key;
  return s.key ? std::string(s.key) + " (" + flag_text(s.flag) + ")" : flag_text(s.flag);
}

// Throws "key (--flag) must be … (got x)" for the first value outside its row's range, naming the setting as a
// checkpoint stores it and the flag that sets it (as validate(ModelConfig) does).
template <typename Config>
void check_ranges(const std::vector<Setting<Config>>& table, const Config& config) {
  Config c = config;
  for (const Setting<Config>& s : table)
    std::visit(
        [&](auto* field) {
          using T = std::remove_pointer_t<decltype(field)>;
          if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
            if (!settings_detail::in_range(s.range, double(*field)))
              throw std::runtime_error(setting_name(s) +
                                       " " + settings_detail::range_text(s.range) +
                                       s.range.note + " (got " + settings_detail::value_text(*field) + ")");
          }
        },
        s.field(c));
}

// Whether `config` stores row s: a stored scope, and setting_stored agrees.
template <typename Config>
bool stores(const Setting<Config>& s, const Config& config) {
  return s.key && s.scope != Scope::Invocation && setting_stored(s.key, config);
}

// The rows a checkpoint stores (Scope::Run and Scope::Knob, each when setting_stored agrees), as one JSON object.
template <typename Config>
nlohmann::json settings_to_json(const std::vector<Setting<Config>>& table, const Config& config) {
  Config c = config;
  nlohmann::json j = nlohmann::json::object();
  for (const Setting<Config>& s : table)
    if (stores(s, config))
      std::visit(
          [&](auto* field) {
            if constexpr (std::is_same_v<std::remove_pointer_t<decltype(field)>, float>)
              j[s.key] = settings_detail::float_json(*field);
            else
              j[s.key] = *field;
          },
          s.field(c));
  return j;
}

// Every key a file may hold for these rows: each stored row's key, and its old key if it was renamed (format 2's
// strict check knows both).
template <typename Config>
std::vector<std::string> stored_keys(const std::vector<Setting<Config>>& table) {
  std::vector<std::string> keys;
  for (const Setting<Config>& s : table)
    if (s.key && s.scope != Scope::Invocation)
      for (const char* key : {s.key, s.old_key})
        if (key) keys.push_back(key);
  return keys;
}

// Reads the stored rows from `j` into `config` (which holds the defaults). Throws on a value of the wrong type
// or outside its range, naming the key, and on a setting stored under both its key and its old key. Returns the
// keys `j` lacks that the config read would store (a setting newer than the file): those keep their defaults.
// `renamed` (if given) gets one line per old key read: "key 'attention' is now 'mixer'".
template <typename Config>
std::vector<std::string> settings_from_json(const std::vector<Setting<Config>>& table, const nlohmann::json& j,
                                            Config& config, std::vector<std::string>* renamed = nullptr) {
  if (!j.is_object()) throw std::runtime_error("not a JSON object");
  std::vector<std::string> missing;
  for (const Setting<Config>& s : table) {
    if (!s.key || s.scope == Scope::Invocation) continue;
    const bool as_old = s.old_key && j.contains(s.old_key);
    if (as_old && j.contains(s.key))
      throw std::runtime_error(std::string("both '") + s.key + "' and '" + s.old_key + "' (its old name) are given: "
                               "one setting, stored twice");
    const char* key = as_old ? s.old_key : s.key;
    if (!j.contains(key)) {
      missing.push_back(s.key);  // filtered below, once the whole config is read
      if (s.absent)
        std::visit([&](auto* field) { settings_detail::read_json_value(nlohmann::json::parse(s.absent), s.key, *field); },
                   s.field(config));
      continue;
    }
    if (as_old && renamed) renamed->push_back(std::string("key '") + s.old_key + "' is now '" + s.key + "'");
    std::visit(
        [&](auto* field) {
          using T = std::remove_pointer_t<decltype(field)>;
          settings_detail::read_json_value(j.at(key), key, *field);
          if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>)
            if (!settings_detail::in_range(s.range, double(*field)))
              throw std::runtime_error(std::string("'") + key + "' = " + j.at(key).dump() + " is out of range: " +
                                       settings_detail::range_text(s.range));
        },
        s.field(config));
  }
  std::vector<std::string> newer;  // the missing keys this config would store
  for (const std::string& key : missing)
    for (const Setting<Config>& s : table)
      if (s.key && key == s.key && stores(s, config)) newer.push_back(key);
  return newer;
}

// "n_layer = 4": a row's current value, for messages.
template <typename Config>
std::string setting_text(const Setting<Config>& s, const Config& config) {
  Config c = config;
  return std::visit([&](auto* field) { return settings_detail::value_text(*field); }, s.field(c));
}

// The same rows as a safetensors header's metadata, which holds only strings: numbers and booleans as their JSON
// text ("4", "true", "0.02"), strings as they are.
template <typename Config>
std::map<std::string, std::string> settings_to_metadata(const std::vector<Setting<Config>>& table,
                                                        const Config& config) {
  std::map<std::string, std::string> out;
  const nlohmann::json j = settings_to_json(table, config);
  for (const auto& [key, value] : j.items())
    out[key] = value.is_string() ? value.template get<std::string>() : value.dump();
  return out;
}

// Reads those strings back into `config` (which holds the defaults), type and range checked like
// settings_from_json (old keys too). Returns the keys the metadata lacks (they keep their defaults).
template <typename Config>
std::vector<std::string> settings_from_metadata(const std::vector<Setting<Config>>& table,
                                                const std::map<std::string, std::string>& meta, Config& config,
                                                std::vector<std::string>* renamed = nullptr) {
  nlohmann::json j = nlohmann::json::object();
  Config probe = config;
  for (const Setting<Config>& s : table) {
    if (!s.key || s.scope == Scope::Invocation) continue;
    for (const char* key : {s.key, s.old_key}) {
      if (!key || !meta.count(key)) continue;
      const std::string& text = meta.at(key);
      std::visit(
          [&](auto* field) {
            using T = std::remove_pointer_t<decltype(field)>;
            if constexpr (std::is_same_v<T, std::string>) {
              j[key] = text;
            } else {
              const nlohmann::json v = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
              if (v.is_discarded()) throw std::runtime_error(std::string("'") + key + "' is not a value (got '" + text + "')");
              j[key] = v;
            }
          },
          s.field(probe));
    }
  }
  return settings_from_json(table, j, config, renamed);
}
