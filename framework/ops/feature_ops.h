// framework/ops/feature_ops.h
//
// The ops under tf.feature_column, for framework/feature_column: they turn raw input
// features (strings, integers, floats) into categorical ids, and categorical ids into
// dense rows (embedding bags, multi-hot vectors).
//
// Categorical ids are int64 tensors [batch, n] in which -1 marks "no value": the
// padding of a variable-length feature, an empty string, an out-of-vocabulary value
// without OOV buckets. This is TensorFlow's rule for dense inputs to categorical
// columns (feature_column_v2's ignore values: '' for strings, -1 for integers); a
// rank-1 input [batch] is taken as [batch, 1]. Weights, where given, are float32 of
// the ids' shape; the weight of a missing id is ignored.
//
// Hashing is FarmHash's Fingerprint64 (framework/core/fingerprint.h), as TensorFlow's
// to_hash_bucket_fast and hashed crosses: a value's bucket is the same as in
// TensorFlow, and it never changes between tandem versions (checkpoints depend on it).
//
// Errors (a value outside an identity column's range without a default, an unknown
// label) are INVALID_ARGUMENT at run time naming the node and the value.
//
// Thread safety: graph building, one thread.
#ifndef TANDEM_FRAMEWORK_OPS_FEATURE_OPS_H_
#define TANDEM_FRAMEWORK_OPS_FEATURE_OPS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "framework/graph/scope.h"

namespace tandem::ops {

// TensorFlow's SparseCross default hash key (kSparseCrossDefaultHashKey).
inline constexpr int64_t kCrossHashKey = 0xDECAFCAFFE;

// categorical_column_with_hash_bucket: Fingerprint64(value) mod num_buckets for a
// string; an int32/int64 value is hashed as its decimal text. '' and -1 give -1.
Output CategoricalHash(const Scope& scope, Output input, int64_t num_buckets);

// categorical_column_with_vocabulary_list / _file: the index of each value in
// `vocabulary` (strings for a string input, decimal integers for an int input); a value
// not in it gets vocabulary.size() + Fingerprint64(value) mod num_oov_buckets when
// num_oov_buckets > 0, else `default_value` (-1: no value). '' and -1 give -1. With
// `unknown_is_error` a value not in the vocabulary, '' and -1 included, is
// INVALID_ARGUMENT naming it (labels).
struct VocabularyOptions {
  int64_t num_oov_buckets = 0;
  int64_t default_value = -1;
  bool unknown_is_error = false;
};
Output CategoricalVocabulary(const Scope& scope, Output input,
                             const std::vector<std::string>& vocabulary,
                             const VocabularyOptions& options = {});

// categorical_column_with_identity: the integer itself, in [0, num_buckets); a value
// outside gets `default_value` when `has_default`; without one a negative value is
// dropped (-1) and a value >= num_buckets is INVALID_ARGUMENT. -1 gives -1.
Output CategoricalIdentity(const Scope& scope, Output input, int64_t num_buckets,
                           bool has_default, int64_t default_value);

// bucketized_column: for input [batch, k] (float32 or integer), the bucket of each value
// (0 below boundaries[0], i when boundaries[i-1] <= v < boundaries[i], len(boundaries)
// at or above the last) plus j * (len(boundaries) + 1) for column j, as TensorFlow's
// bucketized column offsets its ids. int64 [batch, k]. REQUIRES: sorted boundaries.
Output CategoricalBucketize(const Scope& scope, Output input, const std::vector<float>& boundaries);

// crossed_column: for each row, every combination of one present value of each input
// (string or integer ids, [batch, n_i]), hashed as TensorFlow's SparseCross with
// hashed_output: h = hash_key, then h = FingerprintCat64(h, Fingerprint64(value)) for
// each input in order (an integer as its decimal text), mod num_buckets. int64
// [batch, max over rows of the number of combinations], -1 padded; the last input
// varies fastest.
Output CategoricalCross(const Scope& scope, const std::vector<Output>& inputs, int64_t num_buckets,
                        int64_t hash_key = kCrossHashKey);

// The embedding bag of ids [batch, n] (embedding_lookup_sparse with a combiner):
// row b of the result is sum_i w_i * table[id_i] over the present ids of row b, divided
// by sum_i w_i ("mean") or sqrt(sum_i w_i^2) ("sqrtn"), or not ("sum"); zeros for a row
// without ids. As safe_embedding_lookup_sparse, mean and sqrtn skip weights <= 0. Built as PrepareBag (the distinct ids and each entry's row and scale),
// one ResourceGather of the distinct rows, and BagCombine, so a table's gradient is
// sparse over just the distinct ids of the batch (optimizer.h, IndexedSlices).
enum class Combiner { kSum, kMean, kSqrtn };
struct BagPlan {
  Output unique_ids;  // int64 [u]: the distinct present ids, in first-seen order.
  Output index;       // int32 [m]: for each present entry, its id's position in unique_ids.
  Output segment;     // int32 [m]: the row of the batch it belongs to.
  Output scale;       // float32 [m]: its weight over the combiner's denominator.
  Output ids;         // The ids, for the batch size.
};
BagPlan PrepareBag(const Scope& scope, Output ids, Output weights, Combiner combiner);
// rows: float32 [u, d], row i of the table at unique_ids[i]. Returns float32 [batch, d].
Output BagCombine(const Scope& scope, Output rows, const BagPlan& plan);

// indicator_column: float32 [batch, depth] whose element [b, id] is the sum of the
// weights (1 without weights) of id in row b. An id outside [0, depth) is
// INVALID_ARGUMENT.
Output MultiHot(const Scope& scope, Output ids, Output weights, int64_t depth);

// The strings of ids: vocabulary[id] for each element (a class id to its name).
// INVALID_ARGUMENT for an id outside the vocabulary.
Output IdsToStrings(const Scope& scope, Output ids, const std::vector<std::string>& vocabulary);

}  // namespace tandem::ops

#endif  // TANDEM_FRAMEWORK_OPS_FEATURE_OPS_H_
