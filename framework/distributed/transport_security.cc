// framework/distributed/transport_security.cc
#include "framework/distributed/transport_security.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "framework/core/env.h"
#include "framework/core/status.h"

namespace tandem {

namespace {

std::string Getenv(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

}  // namespace

TransportSecurity SecurityFromEnvironment() {
  TransportSecurity security;
  security.token = Getenv("TANDEM_CLUSTER_TOKEN");
  security.cert_file = Getenv("TANDEM_TLS_CERT");
  security.key_file = Getenv("TANDEM_TLS_KEY");
  security.ca_file = Getenv("TANDEM_TLS_CA");
  security.server_name = Getenv("TANDEM_TLS_SERVER_NAME");
  return security;
}

namespace {

struct Freer {
  void operator()(X509* p) const { X509_free(p); }
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
  void operator()(BIO* p) const { BIO_free(p); }
  void operator()(X509_STORE* p) const { X509_STORE_free(p); }
  void operator()(X509_STORE_CTX* p) const { X509_STORE_CTX_free(p); }
};
template <typename T>
using Owned = std::unique_ptr<T, Freer>;

std::string OpenSslError() {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "no detail";
  char buffer[256];
  ERR_error_string_n(e, buffer, sizeof(buffer));
  return buffer;
}

absl::StatusOr<std::string> ReadFileNamed(const std::string& path, absl::string_view what) {
  absl::StatusOr<std::string> data = env::ReadFile(path);
  if (!data.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read the TLS ", what, " file ", path, ": ", data.status().message()));
  }
  return data;
}

Owned<BIO> MemoryBio(const std::string& data) {
  return Owned<BIO>(BIO_new_mem_buf(data.data(), static_cast<int>(data.size())));
}

absl::Status Invalid(absl::string_view what, const std::string& path, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("the TLS ", what, " file ", path, " ", why));
}

}  // namespace

absl::StatusOr<TlsFiles> ReadTlsFiles(const TransportSecurity& security, bool cluster_peer) {
  TlsFiles files;
  if (!security.tls()) return files;
  if (cluster_peer &&
      (security.cert_file.empty() || security.key_file.empty() || security.ca_file.empty())) {
    return absl::InvalidArgumentError(
        "mutual TLS on a cluster needs all of tls_cert, tls_key and tls_ca: every task proves "
        "itself with its certificate and trusts only the CA's");
  }
  if (security.cert_file.empty() != security.key_file.empty()) {
    return absl::InvalidArgumentError(
        "TLS needs the certificate and its private key together (tls_cert and tls_key)");
  }
  Owned<X509_STORE> store(X509_STORE_new());
  if (!security.ca_file.empty()) {
    TANDEM_ASSIGN_OR_RETURN(files.ca, ReadFileNamed(security.ca_file, "CA"));
    Owned<BIO> bio = MemoryBio(files.ca);
    int added = 0;
    while (Owned<X509> c{PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)}) {
      if (X509_STORE_add_cert(store.get(), c.get()) == 1) ++added;
    }
    ERR_clear_error();  // The end of the file reads as an error.
    if (added == 0) return Invalid("CA", security.ca_file, "holds no PEM certificate");
  }
  if (security.cert_file.empty()) return files;
  TANDEM_ASSIGN_OR_RETURN(files.cert, ReadFileNamed(security.cert_file, "certificate"));
  TANDEM_ASSIGN_OR_RETURN(files.key, ReadFileNamed(security.key_file, "key"));
  Owned<BIO> cert_bio = MemoryBio(files.cert);
  Owned<X509> cert(PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr));
  if (cert == nullptr) {
    return Invalid("certificate", security.cert_file,
                   absl::StrCat("holds no PEM certificate (", OpenSslError(), ")"));
  }
  Owned<BIO> key_bio = MemoryBio(files.key);
  Owned<EVP_PKEY> key(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
  if (key == nullptr) {
    return Invalid("key", security.key_file,
                   absl::StrCat("holds no unencrypted PEM private key (", OpenSslError(), ")"));
  }
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    ERR_clear_error();
    return Invalid("key", security.key_file,
                   absl::StrCat("is not the private key of the certificate ", security.cert_file));
  }
  if (!security.ca_file.empty()) {
    Owned<X509_STORE_CTX> ctx(X509_STORE_CTX_new());
    // Intermediate certificates that follow the first one in cert_file.
    STACK_OF(X509)* chain = sk_X509_new_null();
    while (X509* c = PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr)) {
      sk_X509_push(chain, c);
    }
    ERR_clear_error();
    X509_STORE_CTX_init(ctx.get(), store.get(), cert.get(), chain);
    const int verified = X509_verify_cert(ctx.get());
    const int error = X509_STORE_CTX_get_error(ctx.get());
    sk_X509_pop_free(chain, X509_free);
    if (verified != 1) {
      return Invalid("certificate", security.cert_file,
                     absl::StrCat("does not verify against the CA ", security.ca_file, ": ",
                                  X509_verify_cert_error_string(error)));
    }
  } else if (X509_cmp_current_time(X509_get0_notAfter(cert.get())) < 0) {
    return Invalid("certificate", security.cert_file, "has expired");
  }
  if (cluster_peer) {
    for (auto [purpose, name] : {std::pair{X509_PURPOSE_SSL_SERVER, "serverAuth"},
                                 std::pair{X509_PURPOSE_SSL_CLIENT, "clientAuth"}}) {
      if (X509_check_purpose(cert.get(), purpose, 0) != 1) {
        return Invalid("certificate", security.cert_file,
                       absl::StrCat("may not be used for ", name,
                                    ": every task of a mutual-TLS cluster serves and calls the "
                                    "others with it, so it needs extendedKeyUsage serverAuth, "
                                    "clientAuth (or none)"));
      }
    }
  }
  return files;
}

absl::Status CheckTlsFiles(const TransportSecurity& security, bool cluster_peer) {
  return ReadTlsFiles(security, cluster_peer).status();
}

}  // namespace tandem
