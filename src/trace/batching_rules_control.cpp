// Batching rules of control flow, as JAX's: stablehlo.while (carried values batched to a fixpoint;
// a batched predicate runs until every lane is done, finished lanes kept by select) and
// stablehlo.case (a batched index evaluates every branch and selects per lane; an unbatched
// one batches each branch). Regions are batched by walking their recorded ops again.
#include <any>

#include "cujax/control_flow.h"
#include "cujax/grad.h"
#include "trace/batching_rules.h"

namespace cujax::trace::batching {

using namespace cujax::lax;
using lax::detail::FlatFn;
using lax::detail::FlatOut;

namespace {

Array batched_or_plain(const Batched& y, bool batched, int64_t size, const ir::Operation& op) {
  if (batched) return batch_at(y.value, y.bdim, size);
  if (y.bdim)
    throw Error("internal error: vmap of " + op.name + " found a batched value it had not " +
                "expected to be batched");
  return y.value;
}

const lax::detail::ScanRecord* scan_record(const ir::Operation& op) {
  const std::any* a = annotation(&op);
  return a ? std::any_cast<lax::detail::ScanRecord>(a) : nullptr;
}

// A scan's while (carried values (i, carry..., xs..., ys...), see ScanRecord) recorded while
// the autodiff window is open is batched as a scan of f batched, so that grad of vmap of scan
// still finds its record: batched xs and ys carry the batch at dimension 1, below the scan axis.
std::vector<Batched> scan_rule(const BatchArgs& a, const lax::detail::ScanRecord& rec,
                               const std::vector<bool>& bat) {
  const size_t nc = rec.num_carry, nx = rec.num_xs, ny = rec.num_ys;
  const ir::Block& body = a.op.regions.at(1)->front();
  std::vector<Array> init, xs;
  for (size_t k = 0; k < nc; ++k)
    init.push_back(bat[1 + k] ? batch_at(a.operands[1 + k], a.bdims[1 + k], a.size)
                              : a.operands[1 + k]);
  for (size_t k = 0; k < nx; ++k) {
    const size_t i = 1 + nc + k;
    xs.push_back(bat[i] ? batch_at(a.operands[i], a.bdims[i], a.size, 1) : a.operands[i]);
  }
  const FlatFn f = [&](const std::vector<Array>& v) {
    std::unordered_map<const ir::Value*, Batched> seeds;
    for (size_t k = 0; k < nc + nx; ++k)
      seeds[rec.f_in.at(k)] = Batched{v[k], bat[1 + k] ? Bdim(0) : std::nullopt};
    const std::vector<Batched> o = batch_values(body, seeds, rec.f_out, a.lookup, a.size);
    FlatOut out;
    for (size_t k = 0; k < nc; ++k)
      out.leaves.push_back(batched_or_plain(o.at(k), bat[1 + k], a.size, a.op));
    for (size_t k = 0; k < ny; ++k)
      out.leaves.push_back(batched_or_plain(o.at(nc + k), bat[1 + nc + nx + k], a.size, a.op));
    return out;
  };
  const std::vector<Array> rs = lax::detail::scan_flat(f, nc, init, xs, rec.length, rec.reverse);
  // The while's results: the final counter, the carry, xs unchanged, the stacked ys.
  std::vector<Batched> out{
      Batched{full({}, static_cast<double>(rec.length), DType::I32), std::nullopt}};
  for (size_t k = 0; k < nc; ++k)
    out.push_back(Batched{rs[k], bat[1 + k] ? Bdim(0) : std::nullopt});
  for (size_t k = 0; k < nx; ++k)
    out.push_back(Batched{a.operands[1 + nc + k], a.bdims[1 + nc + k]});
  for (size_t k = 0; k < ny; ++k)
    out.push_back(Batched{rs[nc + k], bat[1 + nc + nx + k] ? Bdim(1) : std::nullopt});
  return out;
}

// Operands: the carried values; the cond and body regions may capture batched values.
std::vector<Batched> while_rule(const BatchArgs& a) {
  const ir::Block& cond = a.op.regions.at(0)->front();
  const ir::Block& body = a.op.regions.at(1)->front();
  const size_t n = a.operands.size();
  std::vector<bool> bat(n);
  for (size_t i = 0; i < n; ++i) bat[i] = a.bdims[i].has_value();
  // A carried value is batched when the body makes it so from the batched ones: iterate to the
  // fixpoint (at most n rounds, each adds one).
  for (bool changed = true; changed;) {
    changed = false;
    const std::vector<bool> out = batched_results(body, bat, a.lookup);
    for (size_t i = 0; i < n; ++i)
      if (out.at(i) && !bat[i]) bat[i] = changed = true;
  }
  // Lanes stop at different steps when the predicate is batched: every carried value is then
  // batched, since a finished lane keeps its values while the others go on.
  const bool pred_batched = batched_results(cond, bat, a.lookup).at(0);
  if (pred_batched) bat.assign(n, true);

  if (const lax::detail::ScanRecord* rec = scan_record(a.op); rec && !pred_batched)
    return scan_rule(a, *rec, bat);

  std::vector<Array> init;
  for (size_t i = 0; i < n; ++i)
    init.push_back(bat[i] ? batch_at(a.operands[i], a.bdims[i], a.size) : a.operands[i]);
  auto block_args = [&](const std::vector<Array>& v) {
    std::vector<Batched> out;
    for (size_t i = 0; i < n; ++i) out.push_back(Batched{v[i], bat[i] ? Bdim(0) : std::nullopt});
    return out;
  };
  // The per-lane predicate at the batch dimension 0, or the shared one.
  auto pred = [&](const std::vector<Array>& v) {
    const Batched p = batch_block(cond, block_args(v), a.lookup, a.size).at(0);
    return p.bdim ? batch_at(p.value, p.bdim, a.size) : p.value;
  };
  const FlatFn c = [&](const std::vector<Array>& v) {
    const Array p = pred(v);
    return FlatOut{{pred_batched ? reduce_or(p, {0}) : p}, ""};
  };
  const FlatFn b = [&](const std::vector<Array>& v) {
    const std::vector<Batched> o = batch_block(body, block_args(v), a.lookup, a.size);
    const Array p = pred_batched ? pred(v) : Array();
    FlatOut out;
    for (size_t i = 0; i < n; ++i) {
      Array y = batched_or_plain(o.at(i), bat[i], a.size, a.op);
      if (pred_batched) y = select(broadcast_in_dim(p, y.shape(), {0}), y, v[i]);
      out.leaves.push_back(y);
    }
    return out;
  };
  const std::vector<Array> rs = lax::detail::while_flat(c, b, init, "");
  std::vector<Batched> out;
  for (size_t i = 0; i < n; ++i) out.push_back(Batched{rs[i], bat[i] ? Bdim(0) : std::nullopt});
  return out;
}

// Operand: the branch index; the branches capture what they use.
std::vector<Batched> case_rule(const BatchArgs& a) {
  const size_t nb = a.op.regions.size(), nr = a.op.num_results();
  if (a.bdims.at(0)) {
    // Every branch on the whole batch, then per lane the branch of its index; an index out of
    // range takes the last branch, as stablehlo.case does.
    std::vector<std::vector<Batched>> outs;
    for (size_t k = 0; k < nb; ++k)
      outs.push_back(batch_block(a.op.regions[k]->front(), {}, a.lookup, a.size));
    const Array index = batch_at(a.operands[0], a.bdims[0], a.size);
    std::vector<Batched> out;
    for (size_t r = 0; r < nr; ++r) {
      Array y = batch_at(outs[nb - 1].at(r).value, outs[nb - 1][r].bdim, a.size);
      for (size_t k = nb - 1; k-- > 0;) {
        const Array pick = eq(index, full(index.shape(), static_cast<double>(k), index.dtype()));
        y = select(broadcast_in_dim(pick, y.shape(), {0}),
                   batch_at(outs[k].at(r).value, outs[k][r].bdim, a.size), y);
      }
      out.push_back(Batched{y, 0});
    }
    return out;
  }
  // A shared index: one case whose branches are batched; a result is batched when it is in any
  // branch.
  std::vector<bool> bat(nr, false);
  for (size_t k = 0; k < nb; ++k) {
    const std::vector<bool> o = batched_results(a.op.regions[k]->front(), {}, a.lookup);
    for (size_t r = 0; r < nr; ++r) bat[r] = bat[r] || o.at(r);
  }
  std::vector<FlatFn> branches;
  std::vector<std::string> names;
  for (size_t k = 0; k < nb; ++k) {
    names.push_back("branch " + std::to_string(k));
    branches.push_back([&, k](const std::vector<Array>&) {
      const std::vector<Batched> o = batch_block(a.op.regions[k]->front(), {}, a.lookup, a.size);
      FlatOut out;
      for (size_t r = 0; r < nr; ++r)
        out.leaves.push_back(batched_or_plain(o.at(r), bat[r], a.size, a.op));
      return out;
    });
  }
  const std::vector<Array> rs = lax::detail::case_flat("case", names, a.operands[0], branches, {});
  std::vector<Batched> out;
  for (size_t r = 0; r < nr; ++r) out.push_back(Batched{rs[r], bat[r] ? Bdim(0) : std::nullopt});
  return out;
}

}  // namespace

void register_control_rules(Rules& r) {
  r["stablehlo.while"] = while_rule;
  r["stablehlo.case"] = case_rule;
}

}  // namespace cujax::trace::batching
