//! The reflector's first step: learn a configured resource's kind and scope from the upstream's
//! discovery document (`/api/v1`, `/apis/<group>/<version>`).
//!
//! Owns one discovery request and its reading. It must not retry (the state machine in
//! [`super`] does) nor create the cache (the reflector does, with what this returns).

use serde::Deserialize;

use super::{ReflectorError, read_body};
use crate::cache::ResourceInfo;
use crate::config::ResourceSpec;
use crate::upstream::Upstream;

/// Learns the kind and scope of a resource from upstream discovery.
pub async fn discover(up: &Upstream, spec: &ResourceSpec) -> Result<ResourceInfo, ReflectorError> {
    let path = if spec.group.is_empty() {
        format!("/api/{}", spec.version)
    } else {
        format!("/apis/{}/{}", spec.group, spec.version)
    };
    let resp = up.get(&path, "application/json").await?;
    let code = resp.status();
    let body = read_body(resp, &path).await?;
    if !code.is_success() {
        return Err(ReflectorError::from_answer(code, &path, &body));
    }
    #[derive(Deserialize)]
    struct Res {
        name: String,
        kind: String,
        namespaced: bool,
    }
    #[derive(Deserialize)]
    struct List {
        #[serde(default, deserialize_with = "kube_wire::list::nullable")]
        resources: Vec<Res>,
    }
    let list: List =
        serde_json::from_slice(&body).map_err(|e| ReflectorError::malformed(&path, e))?;
    let r = list
        .resources
        .into_iter()
        .find(|r| r.name == spec.resource)
        .ok_or_else(|| ReflectorError::NotServed(spec.clone()))?;
    Ok(ResourceInfo::new(
        &spec.group,
        &spec.version,
        &spec.resource,
        &r.kind,
        r.namespaced,
    ))
}
