// Fuzz target: the .npy reader of the CLI (tools/convbwd/npy.cpp).
//
// Promises: parse never reads outside the bytes it is given, never allocates
// more than the file proves it holds, and turns every malformed file into an
// Error with a message; an accepted array holds exactly elements() *
// item_size() bytes, serializes, and parses back to the same array.
#include <cstring>
#include <memory>
#include <string>

#include "fuzz_common.hpp"
#include "npy.hpp"

extern "C" int convbwd_fuzz_npy(const uint8_t* data, size_t size) {
  using namespace convbwd;
  namespace npy = convbwd::cli::npy;
  // An exact-size copy: ASan then sees a read even one byte past the end.
  std::unique_ptr<unsigned char[]> copy(new unsigned char[size]);
  if (size) std::memcpy(copy.get(), data, size);
  auto a = npy::parse({copy.get(), size});
  if (!a) {
    CONVBWD_FUZZ_CHECK(a.error().status == Status::invalid_parameter,
                       "status " + std::to_string(static_cast<int>(a.error().status)));
    CONVBWD_FUZZ_CHECK(!a.error().message.empty(), "rejected without a message");
    return 0;
  }
  CONVBWD_FUZZ_CHECK(a->item_size() > 0, "accepted an unsupported descr '" + a->descr + "'");
  CONVBWD_FUZZ_CHECK(a->elements() >= 0, "negative element count");
  CONVBWD_FUZZ_CHECK(a->data.size() == static_cast<size_t>(a->elements()) * a->item_size(),
                     "data holds " + std::to_string(a->data.size()) + " bytes for shape " +
                         npy::format_shape(a->shape) + " of " + a->descr);
  CONVBWD_FUZZ_CHECK(a->data.size() <= size, "the array is larger than the file");
  auto bytes = npy::serialize(a.value());
  CONVBWD_FUZZ_CHECK(bytes.ok(), "an accepted array does not serialize: " + (bytes.ok() ? "" : bytes.error().message));
  auto b = npy::parse({bytes->data(), bytes->size()});
  CONVBWD_FUZZ_CHECK(b.ok(), "a serialized array does not parse: " + (b.ok() ? "" : b.error().message));
  CONVBWD_FUZZ_CHECK(b->shape == a->shape && b->data == a->data && b->item_size() == a->item_size(),
                     "the round trip changed the array (" + a->descr + " " + npy::format_shape(a->shape) + ")");
  return 0;
}
