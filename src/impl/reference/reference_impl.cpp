// The reference as the last implementation of every list: slow, exact,
// accepts everything.
#include "impl/implementation.hpp"
#include "impl/registry_entries.hpp"
#include "reference/reference.hpp"

namespace convbwd::detail {
namespace {

class ReferenceKernel final : public OpKernel {
 public:
  bool uses_tier_kernels() const override { return false; }
  explicit ReferenceKernel(const OpSpec& op) : op_(op) {}
  void run(const OpArgs& args, ThreadPool&) const override { reference_run(op_, args.a, args.b, args.dst); }

 private:
  OpSpec op_;
};

}  // namespace

const Implementation kReferenceImpl = {
    "reference",
    [](const OpSpec& op, const PlanContext&, std::string*) -> std::unique_ptr<OpKernel> {
      return std::make_unique<ReferenceKernel>(op);
    }};

}  // namespace convbwd::detail
