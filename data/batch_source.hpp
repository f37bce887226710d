// BatchSource: a stream of training batches with epochs and a resumable position. The Loader
// (HDF5 files) is the real one; SyntheticSource (synthetic.hpp) feeds the tiny-8 sandbox model
// without files, for algorithm research and fast distributed tests.
#pragma once

#include "mpigan/core/tensor.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace mpigan::data {

struct Batch {
  Tensor image;                          ///< (n,1,X,Y,Z) preprocessed, canonical host float32; D=x, H=y, W=depth
  Tensor energy;                         ///< (n,1) E * energy_scale (E/100)
  Tensor ecal;                           ///< (n,1) ECAL-sum target (after threshold/xscale, before the power)
  Tensor angle;                          ///< (n,1) radians (ecal51 only; undefined otherwise)
  std::vector<std::uint64_t> event_ids;  ///< Dataset::event_id of each item
  std::int64_t size() const { return static_cast<std::int64_t>(event_ids.size()); }
};

class BatchSource {
 public:
  struct Position {
    std::int64_t epoch = 0;
    std::int64_t cursor = 0;  ///< batches of that epoch already returned
    friend bool operator==(const Position&, const Position&) = default;
  };
  virtual ~BatchSource() = default;
  /// The next batch of this shard; false at the end of an epoch (the call after starts the next).
  virtual bool next(Batch& out) = 0;
  virtual Position position() const = 0;
  /// Restart from @p p (0 <= cursor <= batches_per_epoch()).
  virtual void seek(const Position& p) = 0;
  virtual std::int64_t batches_per_epoch() const = 0;
  std::int64_t epoch() const { return position().epoch; }
};

}  // namespace mpigan::data
