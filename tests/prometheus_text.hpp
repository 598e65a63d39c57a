// SPDX-License-Identifier: MIT OR Apache-2.0
// A strict parser of the Prometheus text exposition format 0.0.4, for the
// tests of Runtime::metrics() / tw_runtime_metrics() (metrics_test.cpp) and
// the demo's --metrics output (metrics_check.cpp).
//
// Stricter than Prometheus itself, on purpose: every line is one of
//   # HELP <name> <text>            (text escapes: \\ and \n only)
//   # TYPE <name> counter|gauge|histogram
//   <name>[{<label>="<value>",...}] <value>     (no timestamp)
// with <name> [a-zA-Z_:][a-zA-Z0-9_:]*, <label> [a-zA-Z_][a-zA-Z0-9_]*,
// label values escaped (\\ \" \n), values Go-ParseFloat numbers or
// +Inf/-Inf/NaN; no empty line, no other comment, '\n' after every line.
// Per family: exactly one HELP and one TYPE, both before its samples, all
// of its lines together; counters named *_total with values >= 0; a
// histogram's samples are <f>_bucket{le=...}, <f>_sum and <f>_count, its
// buckets strictly increasing in le, cumulative (non-decreasing), ending
// in le="+Inf" equal to _count (per label set without le: one histogram per
// runtime). No series (name + label set) twice. The whole text is valid
// UTF-8 (RFC 3629: no overlong forms, surrogates, or code points above
// U+10FFFF), as the format requires (issue 34).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace prom {

struct Sample {
    std::string name;
    std::map<std::string, std::string> labels;
    std::string raw;  // the value as written
    double value = 0;
};

struct Family {
    std::string name;
    std::string type;
    std::string help;
    std::vector<Sample> samples;
};

struct Exposition {
    std::vector<Family> families;  // in the order of the text

    const Family* family(std::string_view name) const {
        for (const Family& f : families)
            if (f.name == name) return &f;
        return nullptr;
    }
    /// The value of the series `name` with exactly `labels`, if present.
    std::optional<double> value(std::string_view name, const std::map<std::string, std::string>& labels = {}) const {
        for (const Family& f : families)
            for (const Sample& s : f.samples)
                if (s.name == name && s.labels == labels) return s.value;
        return std::nullopt;
    }
    const Sample* sample(std::string_view name, const std::map<std::string, std::string>& labels = {}) const {
        for (const Family& f : families)
            for (const Sample& s : f.samples)
                if (s.name == name && s.labels == labels) return &s;
        return nullptr;
    }
};

namespace detail {

inline bool name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':'; }
inline bool name_char(char c) { return name_start(c) || (c >= '0' && c <= '9'); }
inline bool label_start(char c) { return name_start(c) && c != ':'; }
inline bool label_char(char c) { return name_char(c) && c != ':'; }

inline bool is_metric_name(std::string_view s) {
    if (s.empty() || !name_start(s[0])) return false;
    for (char c : s)
        if (!name_char(c)) return false;
    return true;
}

/// A float as Go's strconv.ParseFloat reads it in the exposition
/// (decimal, optional sign/fraction/exponent), or +Inf, -Inf, NaN.
inline bool parse_value(std::string_view s, double& out) {
    if (s == "+Inf" || s == "Inf") {
        out = HUGE_VAL;
        return true;
    }
    if (s == "-Inf") {
        out = -HUGE_VAL;
        return true;
    }
    if (s == "NaN") {
        out = NAN;
        return true;
    }
    std::size_t i = 0;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    std::size_t digits = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i, ++digits;
    if (i < s.size() && s[i] == '.') {
        ++i;
        while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i, ++digits;
    }
    if (digits == 0) return false;
    if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
        ++i;
        if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
        std::size_t exp_digits = 0;
        while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i, ++exp_digits;
        if (exp_digits == 0) return false;
    }
    if (i != s.size()) return false;
    const std::string copy(s);
    out = std::strtod(copy.c_str(), nullptr);
    return true;
}

/// The offset of the first byte of `s` that is not part of a valid UTF-8
/// sequence, or npos.
inline std::size_t invalid_utf8_at(std::string_view s) {
    std::size_t i = 0;
    while (i < s.size()) {
        const auto c = static_cast<unsigned char>(s[i]);
        std::size_t n = 0;
        unsigned lo = 0x80, hi = 0xBF;
        if (c < 0x80) n = 1;
        else if (c >= 0xC2 && c <= 0xDF) n = 2;
        else if (c >= 0xE0 && c <= 0xEF) n = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
        else if (c >= 0xF0 && c <= 0xF4) n = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
        else return i;
        if (i + n > s.size()) return i;
        for (std::size_t k = 1; k < n; ++k) {
            const auto d = static_cast<unsigned char>(s[i + k]);
            if (d < (k == 1 ? lo : 0x80) || d > (k == 1 ? hi : 0xBF)) return i;
        }
        i += n;
    }
    return std::string_view::npos;
}

}  // namespace detail

/// Parses `text`; on the first violation returns false and sets `error` to
/// "line N: what".
inline bool parse(std::string_view text, Exposition& out, std::string& error) {
    using namespace detail;
    out = {};
    std::set<std::string> seen_series;   // name + '\0' + canonical labels
    std::set<std::string> closed;        // families whose lines are over
    Family* current = nullptr;
    std::size_t line_no = 0;
    auto fail = [&](const std::string& what) {
        error = (line_no != 0 ? "line " + std::to_string(line_no) + ": " : std::string()) + what;
        return false;
    };
    // The family a line belongs to must be the current one, or a new one.
    auto enter = [&](const std::string& fam) -> Family* {
        if (current != nullptr && current->name == fam) return current;
        if (closed.count(fam) != 0) return nullptr;
        if (current != nullptr) closed.insert(current->name);
        out.families.push_back(Family{fam, "", "", {}});
        current = &out.families.back();
        return current;
    };
    // The family a sample name belongs to: a histogram's suffixes map to it.
    auto family_of = [&](const std::string& name) -> std::string {
        if (current != nullptr && current->type == "histogram") {
            for (const char* suffix : {"_bucket", "_sum", "_count"}) {
                const std::string f = current->name + suffix;
                if (name == f) return current->name;
            }
        }
        return name;
    };

    if (text.empty()) return fail("empty exposition");
    if (text.back() != '\n') return fail("the text does not end in a newline");
    if (const std::size_t bad = invalid_utf8_at(text); bad != std::string_view::npos)
        return fail("not UTF-8: byte " + std::to_string(bad) + " of the text");
    std::size_t pos = 0;
    while (pos < text.size()) {
        const std::size_t eol = text.find('\n', pos);
        const std::string_view line = text.substr(pos, eol - pos);
        pos = eol + 1;
        ++line_no;
        if (line.empty()) return fail("empty line");
        if (line.find('\r') != std::string_view::npos) return fail("carriage return");

        if (line[0] == '#') {
            const bool help = line.substr(0, 7) == "# HELP ";
            const bool type = line.substr(0, 7) == "# TYPE ";
            if (!help && !type) return fail("a comment other than # HELP / # TYPE: " + std::string(line));
            const std::string_view rest = line.substr(7);
            const std::size_t sp = rest.find(' ');
            if (sp == std::string_view::npos) return fail("no text after the metric name");
            const std::string name(rest.substr(0, sp));
            const std::string_view arg = rest.substr(sp + 1);
            if (!is_metric_name(name)) return fail("bad metric name '" + name + "'");
            Family* f = enter(name);
            if (f == nullptr) return fail("family " + name + " continues after another family");
            if (!f->samples.empty()) return fail("# HELP/# TYPE of " + name + " after its samples");
            if (help) {
                if (!f->help.empty()) return fail("second # HELP for " + name);
                if (arg.empty()) return fail("empty help text for " + name);
                for (std::size_t i = 0; i < arg.size(); ++i)
                    if (arg[i] == '\\' && (i + 1 == arg.size() || (arg[i + 1] != '\\' && arg[i + 1] != 'n')))
                        return fail("bad escape in the help text of " + name);
                    else if (arg[i] == '\\')
                        ++i;
                f->help = std::string(arg);
            } else {
                if (!f->type.empty()) return fail("second # TYPE for " + name);
                if (arg != "counter" && arg != "gauge" && arg != "histogram")
                    return fail("type '" + std::string(arg) + "' of " + name);
                if (arg == "counter" && (name.size() < 6 || name.compare(name.size() - 6, 6, "_total") != 0))
                    return fail("counter " + name + " does not end in _total");
                f->type = std::string(arg);
            }
            continue;
        }

        // A sample.
        Sample s;
        std::size_t i = 0;
        while (i < line.size() && name_char(line[i])) ++i;
        s.name = std::string(line.substr(0, i));
        if (!is_metric_name(s.name)) return fail("bad metric name in sample: " + std::string(line));
        if (i < line.size() && line[i] == '{') {
            ++i;
            while (true) {
                if (i < line.size() && line[i] == '}') break;  // also "{}" and a trailing comma
                const std::size_t ls = i;
                if (i >= line.size() || !label_start(line[i])) return fail("bad label name");
                while (i < line.size() && label_char(line[i])) ++i;
                const std::string lname(line.substr(ls, i - ls));
                if (lname.size() >= 2 && lname.compare(0, 2, "__") == 0) return fail("reserved label " + lname);
                if (line.substr(i, 2) != "=\"") return fail("label " + lname + " without =\"");
                i += 2;
                std::string lvalue;
                while (true) {
                    if (i >= line.size()) return fail("unterminated label value");
                    const char c = line[i++];
                    if (c == '"') break;
                    if (c == '\\') {
                        if (i >= line.size()) return fail("unterminated escape");
                        const char e = line[i++];
                        if (e == '\\') lvalue += '\\';
                        else if (e == '"') lvalue += '"';
                        else if (e == 'n') lvalue += '\n';
                        else return fail("bad escape in a label value");
                    } else {
                        lvalue += c;
                    }
                }
                if (!s.labels.emplace(lname, lvalue).second) return fail("label " + lname + " twice");
                if (i < line.size() && line[i] == ',') {
                    ++i;
                    continue;
                }
                if (i < line.size() && line[i] == '}') break;
                return fail("expected , or } after a label");
            }
            ++i;  // '}'
        }
        if (i >= line.size() || line[i] != ' ') return fail("no single space before the value: " + std::string(line));
        ++i;
        const std::string_view value = line.substr(i);
        if (value.find(' ') != std::string_view::npos) return fail("a timestamp or trailing text: " + std::string(line));
        if (!parse_value(value, s.value)) return fail("bad value '" + std::string(value) + "'");
        s.raw = std::string(value);

        const std::string fam = family_of(s.name);
        Family* f = enter(fam);
        if (f == nullptr) return fail("family " + fam + " continues after another family");
        if (f->type.empty()) return fail("sample of " + fam + " before its # TYPE");
        if (f->help.empty()) return fail("sample of " + fam + " before its # HELP");
        if (f->type == "histogram" && s.name == fam) return fail("histogram sample without a suffix: " + s.name);
        if (f->type == "counter" && !(s.value >= 0)) return fail("negative or NaN counter " + s.name);
        std::string key = s.name + '\0';
        for (const auto& [k, v] : s.labels) key += k + '=' + v + '\0';
        if (!seen_series.insert(key).second) return fail("duplicate series: " + std::string(line));
        f->samples.push_back(std::move(s));
    }

    // Families: typed, and histograms complete and cumulative.
    line_no = 0;
    for (const Family& f : out.families) {
        if (f.samples.empty()) return fail("family " + f.name + " has no samples");
        if (f.type != "histogram") {
            for (const Sample& s : f.samples)
                if (s.labels.count("le") != 0) return fail(f.name + ": le label outside a histogram");
            continue;
        }
        // One histogram per label set (without le): e.g. one per runtime.
        struct Series {
            const Sample* sum = nullptr;
            const Sample* count = nullptr;
            std::vector<const Sample*> buckets;
        };
        std::map<std::map<std::string, std::string>, Series> series;
        for (const Sample& s : f.samples) {
            std::map<std::string, std::string> key = s.labels;
            key.erase("le");
            Series& x = series[key];
            if (s.name == f.name + "_sum") {
                if (s.labels.count("le") != 0) return fail(f.name + "_sum with an le label");
                x.sum = &s;
            } else if (s.name == f.name + "_count") {
                if (s.labels.count("le") != 0) return fail(f.name + "_count with an le label");
                x.count = &s;
            } else {
                if (s.labels.count("le") != 1) return fail(f.name + "_bucket needs the le label");
                x.buckets.push_back(&s);
            }
        }
        for (const auto& [key, x] : series) {
            if (x.sum == nullptr || x.count == nullptr || x.buckets.empty())
                return fail(f.name + ": missing _sum, _count or _bucket");
            double last_le = -HUGE_VAL, last_n = 0;
            for (const Sample* b : x.buckets) {
                double le = 0;
                if (!parse_value(b->labels.at("le"), le) || std::isnan(le)) return fail(f.name + ": bad le");
                if (!(le > last_le)) return fail(f.name + ": le not increasing at " + b->labels.at("le"));
                if (!(b->value >= last_n)) return fail(f.name + ": buckets not cumulative at le=" + b->labels.at("le"));
                last_le = le;
                last_n = b->value;
            }
            if (x.buckets.back()->labels.at("le") != "+Inf") return fail(f.name + ": the last bucket is not le=\"+Inf\"");
            if (x.buckets.back()->value != x.count->value) return fail(f.name + ": +Inf bucket != _count");
            if (!(x.sum->value >= 0)) return fail(f.name + ": negative _sum");
        }
    }
    return true;
}

/// Checks that every sample of `e` carries the label `label` and removes
/// it; the distinct values seen go to `values` (in order of first
/// appearance). False (with `error`) if a sample lacks it.
inline bool take_label(Exposition& e, const std::string& label, std::vector<std::string>& values, std::string& error) {
    values.clear();
    for (Family& f : e.families)
        for (Sample& s : f.samples) {
            const auto it = s.labels.find(label);
            if (it == s.labels.end()) {
                error = "series " + s.name + " has no " + label + " label";
                return false;
            }
            bool seen = false;
            for (const std::string& v : values) seen = seen || v == it->second;
            if (!seen) values.push_back(it->second);
            s.labels.erase(it);
        }
    return true;
}

}  // namespace prom
