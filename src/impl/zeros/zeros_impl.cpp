// The explicit skip path of zero-sized problems: when every output element is
// an empty sum (N = 0 for gradWeight, no channels to sum over, ...), the
// output is zero and nothing is read.
#include "impl/implementation.hpp"
#include "impl/registry_entries.hpp"
#include "impl/view_loops.hpp"

namespace convbwd::detail {
namespace {

class ZerosKernel final : public OpKernel {
 public:
  bool uses_tier_kernels() const override { return false; }
  explicit ZerosKernel(const View& dst) : dst_(dst) {}
  void run(const OpArgs& args, ThreadPool&) const override { fill_zero(dst_, args.dst); }

 private:
  View dst_;
};

}  // namespace

const Implementation kZerosImpl = {
    "zeros", [](const OpSpec& op, const PlanContext&, std::string* why) -> std::unique_ptr<OpKernel> {
      if (reduction_length(op) != 0) {
        *why = "the reduction is not empty";
        return nullptr;
      }
      return std::make_unique<ZerosKernel>(op.dst);
    }};

}  // namespace convbwd::detail
