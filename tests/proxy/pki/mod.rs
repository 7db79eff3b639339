//! Test certificates made with rcgen: a CA, serving and client certificates (valid or expired),
//! and kubeconfig files (written as JSON, which is YAML) that point at them.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use base64::Engine;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, date_time_ymd,
};
use serde_json::{Value, json};

/// A certificate authority.
pub struct Ca {
    issuer: Issuer<'static, KeyPair>,
    /// Its certificate, PEM.
    pub pem: String,
}

/// A certificate and its key, PEM.
#[derive(Clone)]
pub struct Leaf {
    pub cert_pem: String,
    pub key_pem: String,
}

impl Ca {
    pub fn new(name: &str) -> Ca {
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::default();
        p.distinguished_name = DistinguishedName::new();
        p.distinguished_name.push(DnType::CommonName, name);
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let cert = p.self_signed(&key).unwrap();
        Ca {
            pem: cert.pem(),
            issuer: Issuer::new(p, key),
        }
    }

    fn leaf(&self, mut p: CertificateParams, expired: bool) -> Leaf {
        p.not_before = date_time_ymd(2000, 1, 1);
        p.not_after = if expired {
            date_time_ymd(2001, 1, 1)
        } else {
            date_time_ymd(4000, 1, 1)
        };
        let key = KeyPair::generate().unwrap();
        let cert = p.signed_by(&key, &self.issuer).unwrap();
        Leaf {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        }
    }

    /// A serving certificate for 127.0.0.1 and localhost.
    pub fn server(&self) -> Leaf {
        self.server_for(&["127.0.0.1", "localhost"], false)
    }

    /// A serving certificate for `names`, possibly long expired.
    pub fn server_for(&self, names: &[&str], expired: bool) -> Leaf {
        let mut p = CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>())
            .unwrap();
        p.distinguished_name = DistinguishedName::new();
        p.distinguished_name.push(DnType::CommonName, names[0]);
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        self.leaf(p, expired)
    }

    /// A client certificate: CN = user, O = each group (as kube reads them).
    pub fn client(&self, user: &str, groups: &[&str], expired: bool) -> Leaf {
        let mut p = CertificateParams::default();
        p.distinguished_name = DistinguishedName::new();
        p.distinguished_name.push(DnType::CommonName, user);
        for g in groups {
            p.distinguished_name.push(DnType::OrganizationName, *g);
        }
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        self.leaf(p, expired)
    }
}

pub fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// A kubeconfig with one context per `(name, cluster, user)`; `current` is the current context.
pub fn kubeconfig(contexts: &[(&str, Value, Value)], current: Option<&str>) -> Value {
    let mut clusters = Vec::new();
    let mut users = Vec::new();
    let mut ctxs = Vec::new();
    for (name, cluster, user) in contexts {
        clusters.push(json!({"name": name, "cluster": cluster}));
        users.push(json!({"name": name, "user": user}));
        ctxs.push(json!({"name": name, "context": {"cluster": name, "user": name}}));
    }
    let mut kc = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": clusters,
        "users": users,
        "contexts": ctxs,
    });
    if let Some(c) = current {
        kc["current-context"] = json!(c);
    }
    kc
}

/// Writes `kc` as `dir/kubeconfig`.
pub fn write_kubeconfig(dir: &Path, kc: &Value) -> PathBuf {
    let path = dir.join("kubeconfig");
    std::fs::write(&path, serde_json::to_vec_pretty(kc).unwrap()).unwrap();
    path
}

/// The files watchmux serves TLS with, written in `dir`: `serving`'s certificate and key, and
/// `ca`'s certificate to verify client certificates against (`server.tls_cert_file`,
/// `server.tls_key_file`, `server.client_ca_file`).
pub fn write_serving_files(dir: &Path, ca: &Ca, serving: &Leaf) -> (PathBuf, PathBuf, PathBuf) {
    let (cert, key, client_ca) = (dir.join("tls.crt"), dir.join("tls.key"), dir.join("ca.crt"));
    std::fs::write(&cert, &serving.cert_pem).unwrap();
    std::fs::write(&key, &serving.key_pem).unwrap();
    std::fs::write(&client_ca, &ca.pem).unwrap();
    (cert, key, client_ca)
}
