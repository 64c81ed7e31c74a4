// A view of a fixed-size run of floats: its values can change, its size cannot. GPT hands out its parameter and
// gradient arenas this way, because its typed views (GPTParams) point into them and must never dangle.
#pragma once
#include <cstddef>
#include <type_traits>
#include <vector>

template <typename T>
class Span {
 public:
  Span(T* data, size_t size) : data_(data), size_(size) {}
  template <typename U>
  Span(std::vector<U>& v) : data_(v.data()), size_(v.size()) {}  // NOLINT: a vector is a span of itself
  template <typename U>
  Span(const std::vector<U>& v) : data_(v.data()), size_(v.size()) {}  // NOLINT
  template <typename U>
  Span(Span<U> other) : data_(other.data()), size_(other.size()) {}  // NOLINT: float → const float

  T* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T* begin() const { return data_; }
  T* end() const { return data_ + size_; }
  T& operator[](size_t i) const { return data_[i]; }
  std::vector<std::remove_const_t<T>> to_vector() const { return {data_, data_ + size_}; }

 private:
  T* data_;
  size_t size_;
};
