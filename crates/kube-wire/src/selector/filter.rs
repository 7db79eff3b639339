//! A watcher's or list's complete filter: namespace scope plus label, field and shard
//! selectors, validated for one kind exactly as kube-apiserver validates them.
//!
//! The kind's group, scope and CRD selectable fields are the caller's to supply (from discovery),
//! and so are an object's labels and field values: nothing here reads an object.

use std::sync::Arc;

use super::{FieldSelector, LabelSelector, SelectorError, convert_field_selector};
use crate::shard::ShardSelector;

/// The field [`Filter::matches`] asks for an object's uid, which a shard selector over
/// `object.metadata.uid` hashes (no field selector can name it: kube's field label conversion
/// refuses it).
pub const UID_FIELD: &str = "metadata.uid";

/// Namespace scope and selectors of one request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Filter {
    /// Namespace from the URL (None: all namespaces, or a cluster-scoped kind).
    pub namespace: Option<String>,
    /// Label selector.
    pub labels: LabelSelector,
    /// Field selector with canonical field names.
    pub fields: FieldSelector,
    /// `shardSelector` (KEP-5866), ANDed with the others.
    pub shard: Option<Arc<ShardSelector>>,
}

impl Filter {
    /// Parses `labelSelector` and `fieldSelector` and converts field labels for the kind
    /// (`extra`: CRD selectable fields). Errors display as kube's 400 message.
    pub fn parse(
        group: &str,
        kind: &str,
        namespaced: bool,
        extra: &[String],
        namespace: Option<String>,
        label_selector: &str,
        field_selector: &str,
    ) -> Result<Filter, SelectorError> {
        let labels = LabelSelector::parse(label_selector)?;
        let fields = FieldSelector::parse(field_selector)?;
        let fields = convert_field_selector(group, kind, namespaced, extra, &fields)?;
        Ok(Filter {
            namespace: if namespaced { namespace } else { None },
            labels,
            fields,
            shard: None,
        })
    }

    /// The same filter, ANDed with `shard`.
    pub fn with_shard(mut self, shard: Option<ShardSelector>) -> Filter {
        self.shard = shard.map(Arc::new);
        self
    }

    /// Whether an object with this namespace, labels and selectable fields passes; `field` also
    /// gives its uid as [`UID_FIELD`] (for a shard selector over it).
    pub fn matches<'v>(
        &self,
        namespace: &str,
        labels: &[(String, String)],
        field: impl Fn(&str) -> Option<&'v str>,
    ) -> bool {
        if let Some(ns) = &self.namespace
            && ns != namespace
        {
            return false;
        }
        if let Some(shard) = &self.shard
            && !shard.matches(field(UID_FIELD).unwrap_or_default(), namespace)
        {
            return false;
        }
        self.labels.matches(labels) && self.fields.matches(field)
    }

    /// No label, field or shard selector: kube then reports `remainingItemCount` (with a shard
    /// selector only, kube 1.36 still reports the unfiltered count, a bug 1.37 fixed by
    /// omitting it, as here).
    pub fn no_selectors(&self) -> bool {
        self.labels.is_empty() && self.fields.is_empty() && self.shard.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_and_selects() {
        let f = Filter::parse(
            "",
            "Pod",
            true,
            &[],
            Some("a".into()),
            "app=web",
            "spec.host=n1",
        )
        .unwrap();
        let labels = vec![("app".to_string(), "web".to_string())];
        let fields = [("spec.nodeName", "n1")];
        let get = |k: &str| fields.iter().find(|(n, _)| *n == k).map(|(_, v)| *v);
        assert!(f.matches("a", &labels, get));
        assert!(!f.matches("b", &labels, get));
        assert!(!f.matches("a", &[], get));
        assert!(!f.no_selectors());
        assert!(Filter::parse("", "Pod", true, &[], None, "", "bogus=1").is_err());
        let nodes = Filter::parse("", "Node", false, &[], Some("x".into()), "", "").unwrap();
        assert_eq!(
            nodes.namespace, None,
            "cluster-scoped kinds ignore a namespace"
        );
    }
}
