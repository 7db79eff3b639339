//! TEMPORARY stub until the patch module lands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    Json,
    Merge,
    StrategicMerge,
    Apply,
}
impl PatchType {
    pub fn from_content_type(ct: &str) -> Option<PatchType> {
        match ct.split(';').next()?.trim() {
            "application/json-patch+json" => Some(PatchType::Json),
            "application/merge-patch+json" => Some(PatchType::Merge),
            "application/strategic-merge-patch+json" => Some(PatchType::StrategicMerge),
            "application/apply-patch+yaml" => Some(PatchType::Apply),
            _ => None,
        }
    }
}
#[derive(Debug, thiserror::Error)]
#[error("x")]
pub struct PatchError;
impl PatchError {
    pub fn code(&self) -> u16 {
        400
    }
    pub fn reason(&self) -> &'static str {
        "BadRequest"
    }
}
pub fn apply_patch(
    _ty: PatchType,
    _kind: &str,
    original: &serde_json::Value,
    _patch: &[u8],
) -> Result<serde_json::Value, PatchError> {
    Ok(original.clone())
}
