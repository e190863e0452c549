// tests/framework/distributed/transport_security_test.cc
//
// CheckTlsFiles: a task refuses, naming the file, TLS material that cannot work (a
// key of another certificate, a certificate of another CA, one that may not act as a
// client in a mutual-TLS cluster, a file that is not PEM) before it serves or calls
// anyone; SecurityFromEnvironment reads the token and the TLS files.
#include "framework/distributed/transport_security.h"

#include <cstdlib>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;

std::string Tls(const std::string& name) {
  std::string here = __FILE__;  // [<root>/]tests/framework/distributed/...
  std::string root = here.substr(0, here.rfind("tests/framework/"));
  return (root.empty() ? "./" : root) + "tests/data/tls/" + name;
}

TransportSecurity Files(const std::string& cert, const std::string& key, const std::string& ca) {
  TransportSecurity s;
  s.cert_file = cert.empty() ? "" : Tls(cert);
  s.key_file = key.empty() ? "" : Tls(key);
  s.ca_file = ca.empty() ? "" : Tls(ca);
  return s;
}

void ExpectInvalid(const absl::Status& s, std::initializer_list<std::string> parts) {
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  for (const std::string& p : parts) EXPECT_THAT(s.message(), HasSubstr(p));
}

TEST(TransportSecurityTest, GoodFilesPass) {
  EXPECT_TRUE(CheckTlsFiles({}, /*cluster_peer=*/true).ok());  // No TLS.
  const TransportSecurity peer = Files("cluster/task.pem", "cluster/task.key", "cluster/ca.pem");
  EXPECT_TRUE(CheckTlsFiles(peer, /*cluster_peer=*/true).ok()) << CheckTlsFiles(peer, true);
  // A server certificate (serverAuth only) is fine for `trainer serve`.
  EXPECT_TRUE(CheckTlsFiles(Files("server.pem", "server.key", "ca.pem"), false).ok());
  // A client that only checks the server.
  EXPECT_TRUE(CheckTlsFiles(Files("", "", "ca.pem"), false).ok());
}

TEST(TransportSecurityTest, MismatchedFilesAreNamed) {
  ExpectInvalid(CheckTlsFiles(Files("cluster/task.pem", "other/task.key", "cluster/ca.pem"), true),
                {"other/task.key", "is not the private key of the certificate"});
  ExpectInvalid(CheckTlsFiles(Files("other/task.pem", "other/task.key", "cluster/ca.pem"), true),
                {"other/task.pem", "does not verify against the CA", "cluster/ca.pem"});
  ExpectInvalid(CheckTlsFiles(Files("server.pem", "server.key", "ca.pem"), true),
                {"server.pem", "may not be used for clientAuth"});
  ExpectInvalid(CheckTlsFiles(Files("cluster/task.pem", "cluster/task.key", ""), true),
                {"needs all of tls_cert, tls_key and tls_ca"});
  ExpectInvalid(CheckTlsFiles(Files("cluster/task.pem", "", "cluster/ca.pem"), false),
                {"certificate and its private key together"});
  ExpectInvalid(CheckTlsFiles(Files("README.md", "cluster/task.key", "cluster/ca.pem"), false),
                {"README.md", "holds no PEM certificate"});
  ExpectInvalid(CheckTlsFiles(Files("cluster/task.pem", "cluster/task.key", "README.md"), false),
                {"README.md", "holds no PEM certificate"});
  ExpectInvalid(CheckTlsFiles(Files("cluster/task.pem", "cluster/task.key", "no_such.pem"), false),
                {"cannot read the TLS CA file", "no_such.pem"});
}

TEST(TransportSecurityTest, EnvironmentGivesTokenAndFiles) {
  setenv("TANDEM_CLUSTER_TOKEN", "t0k", 1);
  setenv("TANDEM_TLS_CERT", "/c.pem", 1);
  setenv("TANDEM_TLS_KEY", "/c.key", 1);
  setenv("TANDEM_TLS_CA", "/ca.pem", 1);
  setenv("TANDEM_TLS_SERVER_NAME", "tandem-cluster", 1);
  const TransportSecurity s = SecurityFromEnvironment();
  EXPECT_EQ(s.token, "t0k");
  EXPECT_EQ(s.cert_file, "/c.pem");
  EXPECT_EQ(s.key_file, "/c.key");
  EXPECT_EQ(s.ca_file, "/ca.pem");
  EXPECT_EQ(s.server_name, "tandem-cluster");
  for (const char* v : {"TANDEM_CLUSTER_TOKEN", "TANDEM_TLS_CERT", "TANDEM_TLS_KEY",
                        "TANDEM_TLS_CA", "TANDEM_TLS_SERVER_NAME"}) {
    unsetenv(v);
  }
  EXPECT_FALSE(SecurityFromEnvironment().tls());
}

}  // namespace
}  // namespace tandem
