// The etcd backend's security keys of --rdzv-conf (docs/guides/etcd.md "Security"): TLS with
// torch's key names (etcd backend: protocol, cacert, cert, key; etcd-v2 backend: ca_cert, ssl_cert,
// ssl_cert_key) and an etcd user (username, password_file, or the password in MUSTER_ETCD_PASSWORD:
// never on the command line). Files are read once every flag is in, so that a bad one is an exit 2
// naming its key and path before anything starts.
#ifndef MUSTER_AGENT_ETCD_SECURITY_FLAGS_H_
#define MUSTER_AGENT_ETCD_SECURITY_FLAGS_H_

#include <map>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "agent/config/config.h"
#include "rendezvous/etcd/etcd_security.h"

namespace muster {

// One --rdzv-conf item (`where`: the flag it came from); nullopt when `key` is not one of
// these. Values are kept as given; FinishEtcdSecurity checks them.
std::optional<absl::Status> ApplyEtcdSecurityKey(const std::string& where, const std::string& key,
                                                 const std::string& value, Config* config);

// Once --rdzv-backend and the environment are known: the keys are for etcd only, TLS files
// need protocol=https, cert and key come together, a user needs a password (password_file,
// else MUSTER_ETCD_PASSWORD); reads the files into config->etcd_access.
absl::Status FinishEtcdSecurity(const std::map<std::string, std::string>& env, Config* config);

// The etcd client's view of the finished keys (PEM texts and the password, no paths).
rdzv::etcd::EtcdSecurity EtcdSecurityOf(const EtcdAccess& access);

}  // namespace muster

#endif  // MUSTER_AGENT_ETCD_SECURITY_FLAGS_H_
