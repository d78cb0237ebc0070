#include "rendezvous/etcd/etcd_client.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <optional>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/mutex.h"
#include "etcd/etcdserverpb/rpc.grpc.pb.h"
#include "rendezvous/etcd/etcd_errors.h"
#include "rendezvous/wire/status_convert.h"

namespace muster::rdzv::etcd {

namespace pb = ::etcdserverpb;
using wire::ToAbslStatus;

std::string PrefixEnd(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    if (static_cast<unsigned char>(end.back()) < 0xff) {
      end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // etcd: every key
}

namespace {

// Errors after which the next member may do better: it is down, slow, or has no leader.
bool TryNextMember(const grpc::Status& s) {
  return s.error_code() == grpc::StatusCode::UNAVAILABLE ||
         s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
         s.error_code() == grpc::StatusCode::UNKNOWN;
}

// etcd no longer takes the token: it expired (simple tokens live --auth-token-ttl) or the
// auth store changed since (ErrInvalidAuthToken, ErrAuthOldRevision). A new one may do.
bool IsStaleToken(const absl::Status& s) {
  return (absl::IsUnauthenticated(s) && absl::StrContains(s.message(), "invalid auth token")) ||
         absl::StrContains(s.message(), "revision of auth store is old");
}

std::shared_ptr<grpc::ChannelCredentials> Credentials(const EtcdSecurity& security) {
  if (!security.tls) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = security.ca_pem;  // empty: gRPC's default roots
  ssl.pem_private_key = security.key_pem;
  ssl.pem_cert_chain = security.cert_pem;
  return grpc::SslCredentials(ssl);
}

KeyValue FromPb(const mvccpb::KeyValue& kv) {
  return KeyValue{.key = kv.key(),
                  .value = kv.value(),
                  .create_revision = kv.create_revision(),
                  .mod_revision = kv.mod_revision(),
                  .lease = kv.lease()};
}

}  // namespace

class EtcdClient::Impl {
 public:
  explicit Impl(const Options& options)
      : endpoints_(options.endpoints),
        timeout_(options.call_timeout),
        username_(options.security.username),
        password_(options.security.password) {
    // The server name checked against etcd's certificate is each endpoint's host.
    credentials_ = Credentials(options.security);
    grpc::ChannelArguments& args = args_;
    // A member that went away is retried soon after it returns.
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    // A member that stopped answering (frozen, cut off) ends the watch stream within
    // about 8 s instead of never; etcd refuses pings more often than every 5 s.
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 5000);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 3000);
    args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    // Renew's new channel gets connections of its own, not the failed one's.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    for (const std::string& e : endpoints_) {
      channels_.push_back(grpc::CreateCustomChannel(e, credentials_, args));
    }
    renewed_.assign(endpoints_.size(), absl::Now());
  }

  size_t size() const { return channels_.size(); }
  size_t current() const { return current_.load(); }
  const std::string& endpoint(size_t i) const { return endpoints_[i]; }
  std::shared_ptr<grpc::Channel> channel(size_t i) const {
    MutexLock lock(&channels_mu_);
    return channels_[i];
  }
  // `failed` was the member in use and did not answer: the next one is used from now on
  // (unless another call moved on already), and its channel is renewed.
  void Failover(size_t failed) {
    Renew(failed);
    size_t expected = failed;
    current_.compare_exchange_strong(expected, (failed + 1) % channels_.size());
  }
  absl::Duration timeout() const { return timeout_; }

  // Runs `call(stub, context)` on each member at most once, from the current one, until
  // one answers; with a user, with its token (a stale one is renewed and the call retried).
  template <typename Stub, typename Call>
  absl::Status Unary(Call call) {
    absl::StatusOr<std::string> token = Token();
    if (!token.ok()) return token.status();
    absl::Status s = OnEachMember<Stub>(call, *token);
    // Auth was off when this client asked, and is on now: "user name is empty".
    const bool auth_on_now = token->empty() && !username_.empty() && absl::IsUnauthenticated(s);
    if (!auth_on_now && (token->empty() || !IsStaleToken(s))) return s;
    DropToken(*token);
    token = Token();
    if (!token.ok()) return token.status();
    return OnEachMember<Stub>(call, *token);
  }

  // The token to send ("" without a user), authenticating when there is none yet.
  absl::StatusOr<std::string> Token() {
    if (username_.empty()) return std::string();
    MutexLock lock(&token_mu_);  // one Authenticate at a time
    if (!token_.empty() || auth_off_) return token_;
    pb::AuthenticateRequest request;
    request.set_name(username_);
    request.set_password(password_);
    pb::AuthenticateResponse response;
    absl::Status s = OnEachMember<pb::Auth>(
        [&](pb::Auth::Stub& stub, grpc::ClientContext& c) {
          return stub.Authenticate(&c, request, &response);
        },
        "");
    if (absl::StrContains(s.message(), "authentication is not enabled")) {
      auth_off_ = true;  // etcd takes every call without a token
      return std::string();
    }
    if (!s.ok()) return s;
    token_ = response.token();
    return token_;
  }

  // etcd refused `stale`: the next Token() authenticates again.
  void DropToken(const std::string& stale) {
    MutexLock lock(&token_mu_);
    if (token_ == stale) token_.clear();
    if (stale.empty()) auth_off_ = false;
  }

 private:
  template <typename Stub, typename Call>
  absl::Status OnEachMember(Call call, const std::string& token) {
    grpc::Status last;
    size_t member = current_.load();
    size_t answered = member;  // the member `last` is from
    for (size_t tried = 0; tried < channels_.size(); ++tried) {
      auto stub = Stub::NewStub(channel(member));
      grpc::ClientContext context;
      context.set_deadline(absl::ToChronoTime(absl::Now() + timeout_));
      if (!token.empty()) context.AddMetadata("token", token);
      last = call(*stub, context);
      answered = member;
      if (!TryNextMember(last)) break;
      Failover(member);
      member = (member + 1) % channels_.size();
    }
    if (last.ok()) return absl::OkStatus();
    absl::Status s = ToAbslStatus(last);
    return ExplainEtcdError(
        absl::Status(s.code(), absl::StrCat("etcd (", endpoints_[answered], "): ", s.message())));
  }

  std::vector<std::string> endpoints_;
  // Replaces member i's channel, at most once a second: gRPC kept a channel that failed
  // while its member was down failing ("connection refused") for over 15 s after the
  // member was back, so that every member restarted within a lease TTL lost every lease.
  void Renew(size_t i) {
    MutexLock lock(&channels_mu_);
    const absl::Time now = absl::Now();
    if (now - renewed_[i] < absl::Seconds(1)) return;
    renewed_[i] = now;
    channels_[i] = grpc::CreateCustomChannel(endpoints_[i], credentials_, args_);
  }

  grpc::ChannelArguments args_;
  std::shared_ptr<grpc::ChannelCredentials> credentials_ = grpc::InsecureChannelCredentials();
  mutable Mutex channels_mu_;  // guards channels_ and renewed_
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  std::vector<absl::Time> renewed_;
  std::atomic<size_t> current_{0};
  absl::Duration timeout_;
  const std::string username_;
  const std::string password_;  // never logged
  Mutex token_mu_;
  std::string token_ ABSL_GUARDED_BY(token_mu_);      // "" until authenticated
  bool auth_off_ ABSL_GUARDED_BY(token_mu_) = false;  // etcd said auth is not enabled
};

absl::StatusOr<std::unique_ptr<EtcdClient>> EtcdClient::Create(const Options& options) {
  if (options.endpoints.empty()) return absl::InvalidArgumentError("no etcd endpoint");
  return std::unique_ptr<EtcdClient>(new EtcdClient(std::make_unique<Impl>(options)));
}

EtcdClient::EtcdClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
EtcdClient::~EtcdClient() = default;

std::string EtcdClient::current_endpoint() const { return impl_->endpoint(impl_->current()); }

absl::StatusOr<int64_t> EtcdClient::GrantLease(absl::Duration ttl) {
  pb::LeaseGrantRequest request;
  request.set_ttl(static_cast<int64_t>(std::ceil(absl::ToDoubleSeconds(ttl))));
  pb::LeaseGrantResponse response;
  absl::Status s = impl_->Unary<pb::Lease>([&](pb::Lease::Stub& stub, grpc::ClientContext& c) {
    return stub.LeaseGrant(&c, request, &response);
  });
  if (!s.ok()) return s;
  if (!response.error().empty()) {
    return absl::FailedPreconditionError(absl::StrCat("etcd lease grant: ", response.error()));
  }
  return response.id();
}

absl::Status EtcdClient::RevokeLease(int64_t lease) {
  pb::LeaseRevokeRequest request;
  request.set_id(lease);
  pb::LeaseRevokeResponse response;
  return impl_->Unary<pb::Lease>([&](pb::Lease::Stub& stub, grpc::ClientContext& c) {
    return stub.LeaseRevoke(&c, request, &response);
  });
}

absl::StatusOr<absl::Duration> EtcdClient::KeepAliveOnce(int64_t lease, absl::Duration per_member) {
  pb::LeaseKeepAliveResponse response;
  absl::Status s = impl_->Unary<pb::Lease>([&](pb::Lease::Stub& stub, grpc::ClientContext& c) {
    if (per_member < absl::InfiniteDuration()) {
      c.set_deadline(std::min(c.deadline(), absl::ToChronoTime(absl::Now() + per_member)));
    }
    auto stream = stub.LeaseKeepAlive(&c);
    pb::LeaseKeepAliveRequest request;
    request.set_id(lease);
    if (stream->Write(request) && stream->Read(&response)) {
      stream->WritesDone();
      c.TryCancel();  // the answer is in; the stream is not needed any more
      stream->Finish().ok();
      return grpc::Status::OK;
    }
    return stream->Finish();
  });
  if (!s.ok()) return s;
  if (response.ttl() <= 0) {
    return absl::NotFoundError(absl::StrCat("etcd lease ", lease, " has expired"));
  }
  return absl::Seconds(response.ttl());
}

absl::StatusOr<int64_t> EtcdClient::Put(const std::string& key, const std::string& value,
                                        int64_t lease) {
  pb::PutRequest request;
  request.set_key(key);
  request.set_value(value);
  request.set_lease(lease);
  pb::PutResponse response;
  absl::Status s = impl_->Unary<pb::KV>(
      [&](pb::KV::Stub& stub, grpc::ClientContext& c) { return stub.Put(&c, request, &response); });
  if (!s.ok()) return s;
  return response.header().revision();
}

namespace {
absl::StatusOr<RangeResult> DoRange(EtcdClient::Impl& impl, const pb::RangeRequest& request) {
  pb::RangeResponse response;
  absl::Status s = impl.Unary<pb::KV>([&](pb::KV::Stub& stub, grpc::ClientContext& c) {
    return stub.Range(&c, request, &response);
  });
  if (!s.ok()) return s;
  RangeResult out;
  out.revision = response.header().revision();
  for (const mvccpb::KeyValue& kv : response.kvs()) out.kvs.push_back(FromPb(kv));
  return out;
}
}  // namespace

absl::StatusOr<RangeResult> EtcdClient::RangePrefix(const std::string& prefix, int64_t revision) {
  pb::RangeRequest request;
  request.set_key(prefix);
  request.set_revision(revision);
  request.set_range_end(PrefixEnd(prefix));
  return DoRange(*impl_, request);
}

absl::StatusOr<std::optional<KeyValue>> EtcdClient::Oldest(const std::string& prefix) {
  absl::StatusOr<RangeResult> got = OldestAt(prefix);
  if (!got.ok()) return got.status();
  if (got->kvs.empty()) return std::nullopt;
  return std::move(got->kvs[0]);
}

absl::StatusOr<RangeResult> EtcdClient::OldestAt(const std::string& prefix) {
  pb::RangeRequest request;
  request.set_key(prefix);
  request.set_range_end(PrefixEnd(prefix));
  request.set_limit(1);
  request.set_sort_order(pb::RangeRequest::ASCEND);
  request.set_sort_target(pb::RangeRequest::CREATE);
  return DoRange(*impl_, request);
}

absl::StatusOr<int64_t> EtcdClient::PutAll(
    const std::vector<std::pair<std::string, std::string>>& kvs, int64_t lease) {
  const size_t txns = (kvs.size() + kMaxTxnOps - 1) / kMaxTxnOps;
  std::vector<absl::StatusOr<int64_t>> done(txns, int64_t{0});
  auto put_txn = [&](size_t t) {
    pb::TxnRequest request;  // no compare: the success branch always runs
    const size_t first = t * kMaxTxnOps;
    const size_t end = std::min(kvs.size(), first + kMaxTxnOps);
    for (size_t i = first; i < end; ++i) {
      pb::PutRequest* put = request.add_success()->mutable_request_put();
      put->set_key(kvs[i].first);
      put->set_value(kvs[i].second);
      put->set_lease(lease);
    }
    pb::TxnResponse response;
    absl::Status s = impl_->Unary<pb::KV>([&](pb::KV::Stub& stub, grpc::ClientContext& c) {
      return stub.Txn(&c, request, &response);
    });
    done[t] = s.ok() ? absl::StatusOr<int64_t>(response.header().revision()) : s;
  };
  // Several transactions in flight at once: etcd puts concurrent proposals into one raft
  // round (one after the other, 32 transactions of a 4096-node round took about a second
  // on a loaded 2-vCPU machine).
  std::vector<std::thread> threads;
  const size_t lanes = std::min<size_t>(txns, kMaxConcurrentTxns);
  for (size_t lane = 1; lane < lanes; ++lane) {
    threads.emplace_back([&, lane] {
      for (size_t t = lane; t < txns; t += lanes) put_txn(t);
    });
  }
  for (size_t t = 0; t < txns; t += std::max<size_t>(lanes, 1)) put_txn(t);
  for (std::thread& t : threads) t.join();
  int64_t revision = 0;
  for (const absl::StatusOr<int64_t>& r : done) {
    if (!r.ok()) return r.status();
    revision = std::max(revision, *r);
  }
  return revision;
}

absl::StatusOr<RangeResult> EtcdClient::Get(const std::string& key, int64_t revision) {
  pb::RangeRequest request;
  request.set_key(key);
  request.set_revision(revision);
  return DoRange(*impl_, request);
}

absl::Status EtcdClient::DeletePrefix(const std::string& prefix) {
  pb::DeleteRangeRequest request;
  request.set_key(prefix);
  request.set_range_end(PrefixEnd(prefix));
  pb::DeleteRangeResponse response;
  return impl_->Unary<pb::KV>([&](pb::KV::Stub& stub, grpc::ClientContext& c) {
    return stub.DeleteRange(&c, request, &response);
  });
}

absl::StatusOr<int64_t> PutWithin(EtcdClient& etcd, const std::string& key,
                                  const std::string& value, int64_t lease, absl::Duration give_up) {
  const absl::Time deadline = absl::Now() + give_up;
  for (;;) {
    absl::StatusOr<int64_t> put = etcd.Put(key, value, lease);
    const bool retryable = absl::IsUnavailable(put.status()) ||
                           absl::IsDeadlineExceeded(put.status()) || absl::IsUnknown(put.status());
    if (put.ok() || absl::Now() >= deadline || !retryable) {
      return put;
    }
    absl::SleepFor(absl::Milliseconds(200));  // a backoff between tries, not polling
  }
}

namespace {

class GrpcEtcdWatch : public EtcdWatch {
 public:
  GrpcEtcdWatch(EtcdClient::Impl& impl, std::string prefix, int64_t start_revision,
                EtcdClient::WatchOptions options)
      : impl_(impl),
        prefix_(std::move(prefix)),
        options_(options),
        next_revision_(start_revision) {}
  ~GrpcEtcdWatch() override { Cancel(); }

  absl::Status Next(std::vector<WatchEvent>* events, absl::Duration give_up) override {
    std::optional<absl::Time> failing_since;
    for (;;) {
      pb::WatchResponse response;
      grpc::ClientReaderWriter<pb::WatchRequest, pb::WatchResponse>* stream = Open();
      if (stream == nullptr) return absl::CancelledError("watch cancelled");
      if (stream->Read(&response)) {
        if (response.canceled()) {
          if (response.compact_revision() > 0) {
            return absl::OutOfRangeError(
                absl::StrCat("etcd compacted past revision ", next_revision_, " of the watch"));
          }
          // etcd refuses a watch with a token it no longer takes as "permission denied".
          if (!token_.empty() && absl::StrContains(response.cancel_reason(), "permission")) {
            impl_.DropToken(token_);
          }
        } else {
          failing_since.reset();
          if (response.events_size() == 0) continue;  // created, or progress
          for (const mvccpb::Event& e : response.events()) {
            events->push_back(
                WatchEvent{.deleted = e.type() == mvccpb::Event::DELETE, .kv = FromPb(e.kv())});
            next_revision_ = e.kv().mod_revision() + 1;
          }
          return absl::OkStatus();
        }
      }
      // The member went away, lost its leader, or cancelled the watch: the next one.
      absl::Status lost = Close();
      if (!lost.ok()) return lost;
      if (!failing_since) failing_since = absl::Now();
      if (absl::Now() - *failing_since > give_up) {
        return absl::UnavailableError(
            absl::StrCat("no etcd member could be watched for ", absl::FormatDuration(give_up)));
      }
      MutexLock lock(&mu_);
      // Backoff between members: woken early by Cancel.
      if (!cancelled_) cancel_cv_.WaitWithTimeout(&mu_, absl::Milliseconds(200));
    }
  }

  void Cancel() override {
    MutexLock lock(&mu_);
    cancelled_ = true;
    if (context_) context_->TryCancel();
    cancel_cv_.SignalAll();
  }

 private:
  // The open stream, opening one on the current member (resuming at next_revision_) if
  // none is; null once cancelled.
  grpc::ClientReaderWriter<pb::WatchRequest, pb::WatchResponse>* Open() {
    std::string token;
    {
      MutexLock lock(&mu_);
      if (cancelled_) return nullptr;
      if (stream_) return stream_.get();
    }
    // Outside mu_ (it may authenticate); a failure shows as a failed watch, retried.
    if (absl::StatusOr<std::string> t = impl_.Token(); t.ok()) token = *t;
    MutexLock lock(&mu_);
    if (cancelled_) return nullptr;
    token_ = token;
    member_ = impl_.current();
    context_ = std::make_unique<grpc::ClientContext>();
    // etcd ends the watch when its member loses the leader, instead of going quiet.
    context_->AddMetadata("hasleader", "true");
    if (!token.empty()) context_->AddMetadata("token", token);
    stub_ = pb::Watch::NewStub(impl_.channel(member_));
    stream_ = stub_->Watch(context_.get());
    pb::WatchRequest request;
    pb::WatchCreateRequest* create = request.mutable_create_request();
    create->set_key(prefix_);
    if (!options_.range_end.empty()) {
      create->set_range_end(options_.range_end);
    } else if (options_.prefix) {
      create->set_range_end(PrefixEnd(prefix_));
    }
    if (options_.deletes_only) create->add_filters(pb::WatchCreateRequest::NOPUT);
    create->set_start_revision(next_revision_);
    stream_->Write(request);  // a failure shows in the first Read
    return stream_.get();
  }

  // Ends the stream; Cancelled if that was Cancel, else moves to the next member.
  absl::Status Close() {
    std::unique_ptr<grpc::ClientReaderWriter<pb::WatchRequest, pb::WatchResponse>> stream;
    {
      MutexLock lock(&mu_);
      stream = std::move(stream_);
      context_->TryCancel();
    }
    // Its status says no more than the failed Read did, but for a token etcd refused.
    absl::Status finished = ToAbslStatus(stream->Finish());
    if (!token_.empty() && IsStaleToken(finished)) impl_.DropToken(token_);
    MutexLock lock(&mu_);
    context_.reset();
    if (cancelled_) return absl::CancelledError("watch cancelled");
    impl_.Failover(member_);
    return absl::OkStatus();
  }

  EtcdClient::Impl& impl_;
  const std::string prefix_;
  const EtcdClient::WatchOptions options_;
  int64_t next_revision_;
  size_t member_ = 0;
  std::string token_;  // the stream's token (the watch thread's)
  std::unique_ptr<pb::Watch::Stub> stub_;
  Mutex mu_;  // guards context_, stream_ and cancelled_ against Cancel
  CondVar cancel_cv_;
  std::unique_ptr<grpc::ClientContext> context_;
  std::unique_ptr<grpc::ClientReaderWriter<pb::WatchRequest, pb::WatchResponse>> stream_;
  bool cancelled_ = false;
};

}  // namespace

std::unique_ptr<EtcdWatch> EtcdClient::WatchPrefix(const std::string& prefix,
                                                   int64_t start_revision) {
  return Watch(prefix, start_revision, {});
}

std::unique_ptr<EtcdWatch> EtcdClient::Watch(const std::string& key, int64_t start_revision,
                                             const WatchOptions& options) {
  return std::make_unique<GrpcEtcdWatch>(*impl_, key, start_revision, options);
}

}  // namespace muster::rdzv::etcd
