// tests/serving/rest_client.h
//
// RestClient: a small blocking HTTP client on libcurl for the REST server's tests and
// benchmark. One client is one libcurl easy handle, so its calls reuse one keep-alive
// connection. Every call is bounded by a timeout; a transport failure (refused,
// reset, timed out) comes back as status 0 with `error` set.
//
// Thread safety: a RestClient is used by one thread at a time; use one per thread.
// CurlGlobalInit() must run before the first client is made while only one thread
// runs (tests call it from a static initialiser).
#ifndef TANDEM_TESTS_SERVING_REST_CLIENT_H_
#define TANDEM_TESTS_SERVING_REST_CLIENT_H_

#include <curl/curl.h>

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

namespace tandem::serving::testing {

inline bool CurlGlobalInit() {
  static const bool done = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
  return done;
}

struct HttpReply {
  long status = 0;  // 0: no HTTP answer (see error).
  std::string body;
  std::string error;    // libcurl's message when the transfer failed.
  std::string headers;  // The response head, raw.
};

class RestClient {
 public:
  explicit RestClient(long timeout_ms = 30000) : curl_(curl_easy_init()), timeout_ms_(timeout_ms) {}
  ~RestClient() {
    curl_easy_cleanup(curl_);
    curl_slist_free_all(list_);
  }
  RestClient(const RestClient&) = delete;
  RestClient& operator=(const RestClient&) = delete;

  HttpReply Get(const std::string& url, const std::vector<std::string>& headers = {}) {
    return Call("GET", url, nullptr, headers);
  }
  HttpReply Post(const std::string& url, const std::string& body,
                 const std::vector<std::string>& headers = {}) {
    return Call("POST", url, &body, headers);
  }
  // Any method; `body` may be null.
  HttpReply Call(const std::string& method, const std::string& url, const std::string* body,
                 const std::vector<std::string>& headers) {
    curl_easy_reset(curl_);  // Keeps the connection cache.
    Setup(url, headers);
    if (body != nullptr) {
      curl_easy_setopt(curl_, CURLOPT_POSTFIELDS, body->data());
      curl_easy_setopt(curl_, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body->size()));
    }
    if (method != "GET" || body != nullptr)
      curl_easy_setopt(curl_, CURLOPT_CUSTOMREQUEST, method.c_str());
    return Perform();
  }
  // A POST whose body of `size` bytes ('1') is sent chunked, without a length.
  HttpReply PostChunked(const std::string& url, size_t size) {
    curl_easy_reset(curl_);
    Setup(url, {"Transfer-Encoding: chunked"});
    chunked_left_ = size;
    curl_easy_setopt(curl_, CURLOPT_POST, 1L);
    curl_easy_setopt(curl_, CURLOPT_READFUNCTION, &RestClient::ReadChunk);
    curl_easy_setopt(curl_, CURLOPT_READDATA, this);
    return Perform();
  }

 private:
  static size_t Collect(char* data, size_t size, size_t n, void* out) {
    static_cast<std::string*>(out)->append(data, size * n);
    return size * n;
  }
  static size_t ReadChunk(char* buffer, size_t size, size_t n, void* self) {
    auto* client = static_cast<RestClient*>(self);
    const size_t k = std::min(size * n, client->chunked_left_);
    std::fill(buffer, buffer + k, '1');
    client->chunked_left_ -= k;
    return k;
  }
  void Setup(const std::string& url, const std::vector<std::string>& headers) {
    reply_ = HttpReply();
    curl_easy_setopt(curl_, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl_, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl_, CURLOPT_TIMEOUT_MS, timeout_ms_);
    curl_easy_setopt(curl_, CURLOPT_WRITEFUNCTION, &RestClient::Collect);
    curl_easy_setopt(curl_, CURLOPT_WRITEDATA, &reply_.body);
    curl_easy_setopt(curl_, CURLOPT_HEADERFUNCTION, &RestClient::Collect);
    curl_easy_setopt(curl_, CURLOPT_HEADERDATA, &reply_.headers);
    if (list_ != nullptr) curl_slist_free_all(list_);
    list_ = curl_slist_append(nullptr, "Content-Type: application/json");
    list_ = curl_slist_append(list_, "Expect:");  // No 100-continue round trip.
    for (const std::string& h : headers) list_ = curl_slist_append(list_, h.c_str());
    curl_easy_setopt(curl_, CURLOPT_HTTPHEADER, list_);
  }
  HttpReply Perform() {
    const CURLcode rc = curl_easy_perform(curl_);
    if (rc != CURLE_OK) {
      reply_.error = curl_easy_strerror(rc);
    } else {
      curl_easy_getinfo(curl_, CURLINFO_RESPONSE_CODE, &reply_.status);
    }
    return reply_;
  }

  CURL* const curl_;
  const long timeout_ms_;
  curl_slist* list_ = nullptr;
  size_t chunked_left_ = 0;
  HttpReply reply_;
};

}  // namespace tandem::serving::testing

#endif  // TANDEM_TESTS_SERVING_REST_CLIENT_H_
