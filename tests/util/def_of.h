// tests/util/def_of.h
//
// DefOf: the GraphDef of a scope's graph, with a test failure when the scope holds an
// error (an op that could not be built).
#ifndef TANDEM_TESTS_UTIL_DEF_OF_H_
#define TANDEM_TESTS_UTIL_DEF_OF_H_

#include "framework/graph/scope.h"
#include "framework/protos/graph.pb.h"
#include "gtest/gtest.h"

namespace tandem::testing {

inline proto::GraphDef DefOf(const Scope& root) {
  EXPECT_TRUE(root.ok()) << root.status();
  proto::GraphDef def;
  root.graph()->ToGraphDef(&def);
  return def;
}

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_UTIL_DEF_OF_H_
