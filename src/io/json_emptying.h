// Freeing a JSON value without allocating. nlohmann's destructor moves a non-empty container's children into a
// vector of its own before freeing them (so that a deep value cannot overflow the stack), and that allocation may
// throw std::bad_alloc. Thrown from a destructor while another exception unwinds (a header read under a memory
// limit), it ended the program in std::terminate. Emptied from its leaves up first, a value's destructor allocates
// nothing: clearing a container of scalars and empty containers only frees.
#pragma once
#include <nlohmann/json.hpp>

inline void empty_without_allocating(nlohmann::json& value) noexcept {
  if (!value.is_structured()) return;
  for (auto child = value.begin(); child != value.end(); ++child) empty_without_allocating(*child);
  if (value.is_array()) value.get_ref<nlohmann::json::array_t&>().clear();
  if (value.is_object()) value.get_ref<nlohmann::json::object_t&>().clear();
}

// Empties a value when it goes out of scope, by an exception or not.
struct EmptiedAtExit {
  nlohmann::json& value;
  ~EmptiedAtExit() { empty_without_allocating(value); }
};
