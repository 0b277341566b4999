//===- GroupKernels.cpp - The kiln-group-kernels pass ----------------------===//
//
// Independent kernels of the same kind that run one after the other become one launch (horizontal fusion):
// the q, k and v projections of an attention block read the same activation and write three outputs, RoPE runs
// once on q and once on k, GPT-2 slices its fused qkv three times. Each such kernel is small next to the launch
// and the tail of a GPU only partly filled; one grouped kernel runs every member's thread blocks side by side.
//
// The grouped gpu.func takes every member's parameters (inputs first, then outputs, member by member, then the
// tensor maps of the members that read through TMA) and has a 1-D grid of all members' blocks: block b runs the
// member whose range holds it, with that member's block index recomputed from b. Before grouping, independent
// calls of one kind are brought next to each other (a decode step's q, k and v chains of matmul, split-K sum and
// RoPE interleave otherwise). Members must be the same kind of kernel op with the same block size, so the
// register and shared-memory budget of the group is the largest member's and nothing else, and take no more
// tensor maps in all than a kernel may. A call may join the group when it reads nothing the group writes; views
// (reshapes, contiguous slices) of the group's results that sit between the calls move after the grouped call.
//
//===----------------------------------------------------------------------===//

#include "Conversion/Passes.h"
#include "GpuKernels.h"
#include "Transforms/Transforms.h"
#include "Dialect/Kiln/KilnDialect.h"
#include "Dialect/Kiln/KilnOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

namespace mlir {
namespace kiln {
#define GEN_PASS_DEF_KILNGROUPKERNELS
#include "Conversion/Passes.h.inc"
} // namespace kiln
} // namespace mlir

using namespace mlir;
using namespace mlir::kiln;

namespace {

/// One kernel call with what grouping needs to know about it.
struct Member {
  /// The call in the host plan.
  func::CallOp call;
  /// The outlined kernel function it calls (kiln.kernel, kiln.launch).
  func::FuncOp host;
  /// That function's gpu.func.
  gpu::GPUFuncOp device;
  /// Launch shape and dynamic shared memory, from kiln.launch.
  SmallVector<int64_t> grid, block;
  int64_t sharedBytes;
  /// The values of a size-generic kernel's trailing index parameters (kiln.launch `sizes`): the grouped kernel
  /// has them as constants.
  SmallVector<int64_t> sizes;
  /// The tensor maps a TMA kernel takes after its sizes (kiln.launch `tensor_maps`): the grouped kernel takes
  /// every member's, after all the buffers.
  SmallVector<DictionaryAttr> tensorMaps;
  /// The kernel op's name: only kernels of one kind are grouped.
  StringRef kind;

  /// Thread blocks in the member's grid.
  int64_t blocks() { return grid[0] * grid[1] * grid[2]; }
  /// Call operands before the destinations.
  unsigned numInputs() { return call.getNumOperands() - call.getNumResults(); }
};

} // namespace

/// The three sizes of a kiln.launch field, or an empty vector.
static SmallVector<int64_t> launchSizes(DictionaryAttr launch, StringRef name) {
  auto sizes = dyn_cast_or_null<DenseI64ArrayAttr>(launch.get(name));
  if (!sizes || sizes.size() != 3)
    return {};
  return llvm::to_vector(sizes.asArrayRef());
}

/// `call` as a group member, or nothing when it is not a GPU kernel launch that grouping can take: a complete
/// kiln.launch, a gpu.func of one block ending in its only gpu.return, one parameter per call operand (then one
/// per launch size and one per tensor map) and no workgroup or private attributions, destinations that are fresh buffers used only
/// here.
static std::optional<Member> memberFor(func::CallOp call, SymbolTableCollection &symbols) {
  auto host = symbols.lookupNearestSymbolFrom<func::FuncOp>(call, call.getCalleeAttr());
  if (!host || !host->hasAttr("kiln.gpu_kernel"))
    return std::nullopt;
  auto launch = host->getAttrOfType<DictionaryAttr>("kiln.launch");
  auto device =
      symbols.lookupNearestSymbolFrom<gpu::GPUFuncOp>(call, host->getAttrOfType<SymbolRefAttr>("kiln.gpu_kernel"));
  Operation *kernelOp = kernelOpOf(host);
  auto sizes = launch ? dyn_cast_or_null<DenseI64ArrayAttr>(launch.get("sizes")) : nullptr;
  size_t numSizes = sizes ? sizes.size() : 0;
  auto maps = launch ? dyn_cast_or_null<ArrayAttr>(launch.get("tensor_maps")) : nullptr;
  size_t numMaps = maps ? maps.size() : 0;
  // A kernel of thread-block clusters (a cluster-split matmul) keeps its grid: its blocks' ranks are its own.
  if (!launch || !device || !kernelOp || !device.getBody().hasOneBlock() || device->hasAttr("nvvm.cluster_dim") ||
      device.getNumArguments() != call.getNumOperands() + numSizes + numMaps ||
      device.getNumWorkgroupAttributions() != 0 ||
      device.getNumPrivateAttributions() != 0)
    return std::nullopt;
  Block &body = device.getBody().front();
  bool oneReturn = isa<gpu::ReturnOp>(body.getTerminator());
  device.walk([&](gpu::ReturnOp ret) { oneReturn &= ret == body.getTerminator(); });
  if (!oneReturn)
    return std::nullopt;
  for (Value destination : call.getOperands().drop_front(call.getNumOperands() - call.getNumResults()))
    if (!destination.getDefiningOp<tensor::EmptyOp>() || !destination.hasOneUse())
      return std::nullopt;
  auto shared = dyn_cast_or_null<IntegerAttr>(launch.get("dynamic_shared_bytes"));
  Member member{call,
                host,
                device,
                launchSizes(launch, "grid"),
                launchSizes(launch, "block"),
                0,
                sizes ? llvm::to_vector(sizes.asArrayRef()) : SmallVector<int64_t>(),
                maps ? llvm::to_vector(maps.getAsRange<DictionaryAttr>()) : SmallVector<DictionaryAttr>(),
                kernelOpName(kernelOp)};
  if (!shared || member.grid.empty() || member.block.empty())
    return std::nullopt;
  member.sharedBytes = shared.getInt();
  return member;
}

namespace {

/// A run of calls being grouped, and the values they produce (with views of them) so far.
struct Group {
  /// The calls, in program order.
  SmallVector<Member, 2> members;
  /// Their results and the views of them seen so far.
  llvm::SetVector<Value> produced;
  /// Views (kiln::isPlanView) of produced values between the calls, in order (they move after the grouped call).
  SmallVector<Operation *> views;

  /// Whether `next` may join: the same kind and block size, reading nothing the group writes, and no more
  /// tensor maps in all than a kernel may take.
  bool admits(Member &next) {
    Member &first = members.front();
    if (next.kind != first.kind || next.block != first.block)
      return false;
    size_t maps = next.tensorMaps.size();
    for (Member &member : members)
      maps += member.tensorMaps.size();
    if (maps > kMaxTensorMaps)
      return false;
    return llvm::none_of(next.call.getOperands(), [&](Value operand) { return produced.contains(operand); });
  }
  /// Appends `member` and what it produces.
  void add(Member member) {
    for (Value result : member.call.getResults())
      produced.insert(result);
    members.push_back(std::move(member));
  }
};

} // namespace

/// Clones `member`'s kernel body into `builder`'s block, its block index recomputed from `local` (the block's
/// number within the member), its buffer parameters mapped to `params`, its size parameters to constants and its
/// tensor-map parameters to `maps`.
static void inlineMemberBody(OpBuilder &builder, Location loc, Member &member, Value local, ValueRange params,
                             ValueRange maps) {
  IRMapping mapping;
  mapping.map(member.device.getArguments().take_front(params.size()), params);
  auto sizeParams = member.device.getArguments().drop_front(params.size()).take_front(member.sizes.size());
  for (auto [param, size] : llvm::zip_equal(sizeParams, member.sizes))
    mapping.map(param, arith::ConstantIndexOp::create(builder, loc, size).getResult());
  mapping.map(member.device.getArguments().take_back(maps.size()), maps);
  Value gx = arith::ConstantIndexOp::create(builder, loc, member.grid[0]);
  Value gxy = arith::ConstantIndexOp::create(builder, loc, member.grid[0] * member.grid[1]);
  Value gy = arith::ConstantIndexOp::create(builder, loc, member.grid[1]);
  Value ids[3] = {arith::RemUIOp::create(builder, loc, local, gx),
                  arith::RemUIOp::create(builder, loc, arith::DivUIOp::create(builder, loc, local, gx), gy),
                  arith::DivUIOp::create(builder, loc, local, gxy)};
  Block &body = member.device.getBody().front();
  for (Operation &op : body.without_terminator())
    builder.clone(op, mapping);
  // The clones' block and grid queries now answer for the member's own grid.
  SmallVector<Operation *> queries;
  builder.getInsertionBlock()->walk([&](Operation *op) {
    if (isa<gpu::BlockIdOp, gpu::GridDimOp>(op))
      queries.push_back(op);
  });
  for (Operation *query : queries) {
    if (auto blockId = dyn_cast<gpu::BlockIdOp>(query)) {
      blockId.replaceAllUsesWith(ids[static_cast<unsigned>(blockId.getDimension())]);
    } else {
      auto gridDim = cast<gpu::GridDimOp>(query);
      OpBuilder at(gridDim);
      gridDim.replaceAllUsesWith(arith::ConstantIndexOp::create(
                                     at, gridDim.getLoc(), member.grid[static_cast<unsigned>(gridDim.getDimension())])
                                     .getResult());
    }
    query->erase();
  }
}

/// Where each parameter of a grouped kernel comes from: (member, operand), every member's inputs first, then
/// every member's destinations.
using ParameterOrigins = SmallVector<std::pair<unsigned, unsigned>>;

/// The parameter order of a grouped kernel.
static ParameterOrigins parameterOrigins(MutableArrayRef<Member> members) {
  ParameterOrigins origins;
  for (auto [index, member] : llvm::enumerate(members))
    for (unsigned i = 0; i < member.numInputs(); ++i)
      origins.push_back({index, i});
  for (auto [index, member] : llvm::enumerate(members))
    for (unsigned i = member.numInputs(); i < member.call.getNumOperands(); ++i)
      origins.push_back({index, i});
  return origins;
}

/// The grouped host-side kernel function `name`: every member's kernel op, each into its own destinations, all
/// results returned in member order.
static func::FuncOp buildGroupedFunction(MutableArrayRef<Member> members, const ParameterOrigins &origins,
                                         StringRef name) {
  Member &first = members.front();
  SmallVector<Type> operandTypes, resultTypes;
  for (auto [index, operand] : origins)
    operandTypes.push_back(members[index].call.getOperand(operand).getType());
  for (Member &member : members)
    llvm::append_range(resultTypes, member.call.getResultTypes());
  OpBuilder builder(first.host);
  auto host =
      func::FuncOp::create(builder, first.host.getLoc(), name, builder.getFunctionType(operandTypes, resultTypes));
  host.setPrivate();
  Block *body = host.addEntryBlock();
  builder.setInsertionPointToStart(body);
  SmallVector<Value> returned;
  for (auto [index, member] : llvm::enumerate(members)) {
    IRMapping mapping;
    for (auto [param, origin] : llvm::enumerate(origins))
      if (origin.first == index)
        mapping.map(member.host.getArgument(origin.second), body->getArgument(param));
    for (Operation &op : member.host.getBody().front().without_terminator())
      builder.clone(op, mapping);
    for (Value value : member.host.getBody().front().getTerminator()->getOperands())
      returned.push_back(mapping.lookup(value));
  }
  func::ReturnOp::create(builder, first.host.getLoc(), returned);
  return host;
}

/// The grouped gpu.func `name`: a 1-D grid of every member's blocks in member order, each block running its
/// member's body; every member's tensor maps follow the buffers, in member order. Returns the function and its
/// grid size.
static std::pair<gpu::GPUFuncOp, int64_t> buildGroupedKernel(MutableArrayRef<Member> members,
                                                             const ParameterOrigins &origins, StringRef name) {
  Member &first = members.front();
  Location loc = first.device.getLoc();
  OpBuilder builder(first.device);
  builder.setInsertionPointAfter(first.device);
  SmallVector<Type> paramTypes;
  for (auto [index, operand] : origins)
    paramTypes.push_back(members[index].device.getArgument(operand).getType());
  SmallVector<int64_t> mapParams;
  for (Member &member : members)
    for (BlockArgument map : member.device.getArguments().take_back(member.tensorMaps.size())) {
      mapParams.push_back(paramTypes.size());
      paramTypes.push_back(map.getType());
    }
  auto device = gpu::GPUFuncOp::create(builder, loc, name, builder.getFunctionType(paramTypes, {}));
  device->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), builder.getUnitAttr());
  if (!mapParams.empty())
    device->setAttr("kiln.tensor_map_params", builder.getDenseI64ArrayAttr(mapParams));
  device.setKnownBlockSizeAttr(first.device.getKnownBlockSizeAttr());
  builder.setInsertionPointToStart(&device.getBody().front());
  Value blockIndex = gpu::BlockIdOp::create(builder, loc, gpu::Dimension::x);
  int64_t start = 0;
  unsigned nextMap = origins.size();
  for (auto [index, member] : llvm::enumerate(members)) {
    // The member's parameters, in its own order.
    SmallVector<Value> params(member.call.getNumOperands());
    for (auto [param, origin] : llvm::enumerate(origins))
      if (origin.first == index)
        params[origin.second] = device.getArgument(param);
    Value begin = arith::ConstantIndexOp::create(builder, loc, start);
    Value end = arith::ConstantIndexOp::create(builder, loc, start + member.blocks());
    Value inside = arith::AndIOp::create(
        builder, loc, arith::CmpIOp::create(builder, loc, arith::CmpIPredicate::uge, blockIndex, begin),
        arith::CmpIOp::create(builder, loc, arith::CmpIPredicate::ult, blockIndex, end));
    auto branch = scf::IfOp::create(builder, loc, inside, /*withElseRegion=*/false);
    OpBuilder inner(branch.thenBlock()->getTerminator());
    Value local = arith::SubIOp::create(inner, loc, blockIndex, begin);
    unsigned maps = member.tensorMaps.size();
    inlineMemberBody(inner, loc, member, local, params, device.getArguments().slice(nextMap, maps));
    nextMap += maps;
    start += member.blocks();
  }
  gpu::ReturnOp::create(builder, loc);
  return {device, start};
}

/// Replaces the group's calls by one call of a new kernel function whose gpu.func runs every member.
static void mergeGroup(Group &group, gpu::GPUModuleOp gpuModule) {
  MutableArrayRef<Member> members = group.members;
  Member &first = members.front();
  std::string name = (first.host.getSymName() + "_x" + Twine(members.size())).str();
  ParameterOrigins origins = parameterOrigins(members);
  func::FuncOp host = buildGroupedFunction(members, origins, name);
  auto [device, blocks] = buildGroupedKernel(members, origins, name);
  int64_t sharedBytes = 0;
  for (Member &member : members)
    sharedBytes = std::max(sharedBytes, member.sharedBytes);
  OpBuilder builder(host);
  host->setAttr("kiln.kernel", builder.getUnitAttr());
  host->setAttr("kiln.gpu_kernel",
                SymbolRefAttr::get(gpuModule.getSymNameAttr(), {FlatSymbolRefAttr::get(device.getNameAttr())}));
  SmallVector<NamedAttribute> launch{
      builder.getNamedAttr("grid", builder.getDenseI64ArrayAttr({blocks, 1, 1})),
      builder.getNamedAttr("block", builder.getDenseI64ArrayAttr(first.block)),
      builder.getNamedAttr("dynamic_shared_bytes", builder.getI64IntegerAttr(sharedBytes))};
  // Each member's tensor maps, their buffers renumbered to the grouped kernel's parameters.
  SmallVector<Attribute> maps;
  for (auto [index, member] : llvm::enumerate(members))
    for (DictionaryAttr map : member.tensorMaps) {
      int64_t buffer = cast<IntegerAttr>(map.get("buffer")).getInt();
      auto *at = llvm::find(origins, std::make_pair(static_cast<unsigned>(index), static_cast<unsigned>(buffer)));
      assert(at != origins.end() && "a tensor map reads one of its member's buffers");
      NamedAttrList fields(map);
      fields.set("buffer", builder.getI64IntegerAttr(at - origins.begin()));
      maps.push_back(fields.getDictionary(builder.getContext()));
    }
  if (!maps.empty())
    launch.push_back(builder.getNamedAttr("tensor_maps", builder.getArrayAttr(maps)));
  host->setAttr("kiln.launch", builder.getDictionaryAttr(launch));
  // Each member's body starts with its wait for the previous kernel (sm_90a): the group launches as they did.
  if (first.host->hasAttr("kiln.dependent_launch"))
    host->setAttr("kiln.dependent_launch", builder.getUnitAttr());

  // The host plan: one call where the last member was, then the views of the results that sat between.
  func::CallOp last = members.back().call;
  builder.setInsertionPoint(last);
  SmallVector<Value> operands;
  for (auto [index, operand] : origins)
    operands.push_back(members[index].call.getOperand(operand));
  auto call = func::CallOp::create(builder, last.getLoc(), host, operands);
  unsigned result = 0;
  for (Member &member : members)
    for (Value old : member.call.getResults())
      old.replaceAllUsesWith(call.getResult(result++));
  Operation *after = call;
  for (Operation *view : group.views) {
    view->moveAfter(after);
    after = view;
  }
  for (Member &member : members) {
    member.call.erase();
    member.host.erase();
    member.device.erase();
  }
}

/// Reorders the kernel calls of `plan` so that independent calls of one kernel kind sit next to each other, where
/// grouping can take them: of the calls whose inputs are ready, one of the last placed call's kind first, else the
/// earliest (the q, k and v chains of a decode step, each a matmul, a sum and a RoPE, become the three matmuls,
/// the three sums and the two RoPEs). Buffers and constants move to the start, views right after what they view.
/// A call that updates a buffer in place (kiln.updates_in_place), or that is no GPU kernel, keeps every call on
/// its side of it. Plans holding anything but buffers, views, constants and calls are left as they are.
static void orderSameKindsTogether(func::FuncOp plan, SymbolTableCollection &symbols) {
  Block &block = plan.getBody().front();
  SmallVector<func::CallOp> calls;
  SmallVector<Operation *> hoisted;
  for (Operation &op : block.without_terminator()) {
    if (auto call = dyn_cast<func::CallOp>(op))
      calls.push_back(call);
    else if (isa<tensor::EmptyOp, ConstantOp>(op))
      hoisted.push_back(&op);
    else if (!isPlanView(&op))
      return;
  }
  if (calls.size() < 3)
    return;
  llvm::DenseMap<Operation *, unsigned> indexOf;
  SmallVector<StringRef> kinds;
  SmallVector<bool> barriers;
  for (auto [index, call] : llvm::enumerate(calls)) {
    indexOf[call] = index;
    auto host = symbols.lookupNearestSymbolFrom<func::FuncOp>(call, call.getCalleeAttr());
    Operation *kernelOp = host ? kernelOpOf(host) : nullptr;
    kinds.push_back(kernelOp ? kernelOpName(kernelOp) : StringRef());
    barriers.push_back(!host || !host->hasAttr("kiln.gpu_kernel") || host->hasAttr(kUpdatesInPlaceAttrName));
  }
  // The call that produces `value` (through views), if any.
  auto producerOf = [&](Value value) -> std::optional<unsigned> {
    if (auto call = viewedStorage(value).getDefiningOp<func::CallOp>())
      return indexOf.lookup(call);
    return std::nullopt;
  };
  SmallVector<llvm::SmallSetVector<unsigned, 4>> dependencies(calls.size());
  for (auto [index, call] : llvm::enumerate(calls)) {
    for (Value operand : call.getOperands())
      if (std::optional<unsigned> producer = producerOf(operand))
        dependencies[index].insert(*producer);
    for (unsigned earlier = 0; earlier < index; ++earlier)
      if (barriers[index] || barriers[earlier])
        dependencies[index].insert(earlier);
  }
  SmallVector<unsigned> order;
  SmallVector<bool> placed(calls.size(), false);
  StringRef lastKind;
  while (order.size() < calls.size()) {
    std::optional<unsigned> pick;
    for (unsigned index = 0; index < calls.size(); ++index) {
      if (placed[index] || !llvm::all_of(dependencies[index], [&](unsigned d) { return placed[d]; }))
        continue;
      if (!pick)
        pick = index;
      if (!lastKind.empty() && kinds[index] == lastKind) {
        pick = index;
        break;
      }
    }
    placed[*pick] = true;
    order.push_back(*pick);
    lastKind = kinds[*pick];
  }
  if (llvm::equal(order, llvm::seq<unsigned>(0, calls.size())))
    return;
  // Each view goes after the call whose result it views (or with the buffers), in its old order.
  llvm::DenseMap<Operation *, SmallVector<Operation *, 2>> viewsAfter;
  SmallVector<Operation *, 2> leadingViews;
  for (Operation &view : block) {
    if (!isPlanView(&view))
      continue;
    if (auto call = viewedStorage(view.getOperand(0)).getDefiningOp<func::CallOp>())
      viewsAfter[call].push_back(&view);
    else
      leadingViews.push_back(&view);
  }
  Operation *end = block.getTerminator();
  for (Operation *op : hoisted)
    op->moveBefore(end);
  for (Operation *view : leadingViews)
    view->moveBefore(end);
  for (unsigned index : order) {
    calls[index]->moveBefore(end);
    for (Operation *view : viewsAfter.lookup(calls[index]))
      view->moveBefore(end);
  }
}

namespace {
struct KilnGroupKernelsPass : kiln::impl::KilnGroupKernelsBase<KilnGroupKernelsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    gpu::GPUModuleOp gpuModule;
    for (auto candidate : module.getOps<gpu::GPUModuleOp>())
      gpuModule = candidate;
    if (!gpuModule)
      return;
    SymbolTableCollection symbols;
    SmallVector<Group, 2> groups;
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal() || func->hasAttr("kiln.kernel"))
        continue;
      orderSameKindsTogether(func, symbols);
      Group current;
      auto flush = [&] {
        if (current.members.size() > 1)
          groups.push_back(std::move(current));
        current = Group();
      };
      for (Operation &op : func.getBody().front()) {
        if (auto call = dyn_cast<func::CallOp>(op)) {
          std::optional<Member> member = memberFor(call, symbols);
          if (!member) {
            flush();
            continue;
          }
          if (current.members.empty() || !current.admits(*member))
            flush();
          current.add(std::move(*member));
          continue;
        }
        bool readsGroup = llvm::any_of(op.getOperands(), [&](Value v) { return current.produced.contains(v); });
        if (!readsGroup && (isa<tensor::EmptyOp, ConstantOp>(op) || isPlanView(&op)))
          continue; // buffers, views and constants do not order kernels
        if (isPlanView(&op)) {
          current.produced.insert(op.getResult(0));
          current.views.push_back(&op);
          continue;
        }
        flush(); // something else needs the group's results here
      }
      flush();
    }
    for (Group &group : groups)
      mergeGroup(group, gpuModule);
  }
};

} // namespace
