// EtcdSecurity: how the etcd client proves itself to etcd and checks etcd (docs/guides/etcd.md
// "Security", --rdzv-conf protocol=https,cacert,cert,key,username,password_file): TLS with an
// optional client certificate, and an etcd user whose token goes with every call.
// Plain data: the PEM texts and the password, never the paths; nothing here is logged.
#ifndef MUSTER_RENDEZVOUS_ETCD_ETCD_SECURITY_H_
#define MUSTER_RENDEZVOUS_ETCD_ETCD_SECURITY_H_

#include <string>

#include "absl/status/status.h"

namespace muster::rdzv::etcd {

struct EtcdSecurity {
  // TLS to every member; the server name checked is the endpoint's host.
  bool tls = false;
  std::string ca_pem;    // the CAs etcd's certificate is checked with; empty: the system's
  std::string cert_pem;  // a client certificate (etcd --client-cert-auth), with key_pem
  std::string key_pem;
  // An etcd user (etcd auth enabled): Authenticate's token is sent as "token" on every call
  // and renewed when etcd says it is no longer valid. Empty: no user.
  std::string username;
  std::string password;  // never logged, never in an error message
};

// Whether `status` (an EtcdClient call's) cannot get better by trying again: etcd refused
// this agent's credentials, its user's permissions, or its TLS certificates (or TLS met a
// plain http member). The rendezvous then fails at once (exit 2) instead of retrying.
bool IsPermanentEtcdError(const absl::Status& status);

// For a join that found no member: over TLS without a client certificate, etcd with
// --client-cert-auth drops the connection after the handshake (TLS 1.3), which looks like
// a member that is down; the hint says so (" (...)"), else "".
std::string TlsHint(const EtcdSecurity& security);

}  // namespace muster::rdzv::etcd

#endif  // MUSTER_RENDEZVOUS_ETCD_ETCD_SECURITY_H_
