//! The HTTP side of the `scale` subresource (`GET`, `PUT` and `PATCH` of
//! `.../{resource}/{name}/scale`): content negotiation, request bodies and answers (JSON or,
//! for a protobuf client, `autoscaling/v1` `Scale` in protobuf). What a scale is and what
//! writing one does is [`Ops`](crate::ops::Ops)'s (`ops::scale`); any other method is kube's
//! 405.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use http::header::{ACCEPT, CONTENT_TYPE};
use http::{Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use serde_json::Value;

use super::{Body, dry_run, json_response, ops_for, read_body, table_include};
use crate::SimState;
use crate::kinds::ResourceType;
use crate::ops::patch_status;
use crate::patch::{PatchError, PatchType};
use crate::protobuf::{self, Input};
use crate::util::now_unix;
use kube_wire::negotiate::{Encoding, Endpoint, Negotiated, Repr, Target};
use kube_wire::path::ResourcePath;
use kube_wire::proto;
use kube_wire::status::Status;
use kube_wire::table::{self, TablePrinter};

/// Serves one request to a scale subresource of `rt` (a kind with `scale_subresource`).
pub(super) async fn serve(
    state: &Arc<SimState>,
    rt: &ResourceType,
    rp: &ResourcePath,
    req: Request<Incoming>,
) -> Result<Response<Body>, Status> {
    let Some(name) = rp.name.as_deref() else {
        return Err(Status::path_not_found());
    };
    if rp.legacy_watch {
        return Err(Status::method_not_allowed());
    }
    state
        .stats
        .resource(rt.index)
        .other_requests
        .fetch_add(1, Ordering::Relaxed);
    let ns = rp.namespace.as_deref();
    let header = |h| {
        req.headers()
            .get(h)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let endpoint = Endpoint {
        protobuf: proto::message_for(SCALE_API_VERSION, "Scale").is_some(),
        watch: false,
    };
    // kube negotiates the answer before it reads a body.
    let wire = protobuf::negotiate(header(ACCEPT).as_deref(), Target::Object, "Scale", endpoint)?;
    let scale = match req.method().clone() {
        Method::GET => {
            let scale = state.ops.get_scale(rt, ns, name)?;
            if wire.encoding == Encoding::Protobuf {
                return answer(&scale, wire);
            }
            let repr = wire.repr;
            let body = match repr {
                Repr::Json => scale,
                Repr::Table => TablePrinter::for_kind("autoscaling", "Scale").object_table(
                    "autoscaling",
                    "Scale",
                    &scale,
                    table_include(repr, req.uri().query())?,
                    false,
                    now_unix(),
                ),
                Repr::Metadata => table::partial_object_metadata(&scale),
            };
            return Ok(json_response(StatusCode::OK, table::to_go_json(&body)));
        }
        Method::PUT => {
            let input = protobuf::input(header(CONTENT_TYPE).as_deref())?;
            let query = req.uri().query().map(str::to_string);
            let body = read_body(req).await?;
            let ops = ops_for(state, dry_run::check(query.as_deref(), "UpdateOptions")?);
            if input == Input::Protobuf {
                let msg = proto::message_for(SCALE_API_VERSION, "Scale");
                let scale = protobuf::decode_typed(SCALE_API_VERSION, "Scale", msg, &body)?;
                let scale = ops.update_scale(rt, ns, name, scale)?;
                return answer(&scale, wire);
            }
            let scale = match serde_json::from_slice::<Value>(&body) {
                Ok(v @ Value::Object(_)) => v,
                Ok(_) => {
                    return Err(Status::bad_request(
                        "the object provided is unrecognized (must be of type Scale): couldn't get version/kind; json parse error: json: cannot unmarshal into Go value of type struct",
                    ));
                }
                Err(e) => {
                    return Err(Status::bad_request(format!(
                        "the object provided is unrecognized (must be of type Scale): couldn't get version/kind; json parse error: {e}"
                    )));
                }
            };
            ops.update_scale(rt, ns, name, scale)?
        }
        Method::PATCH => {
            let ct = header(CONTENT_TYPE).unwrap_or_default();
            let ty = PatchType::from_content_type(&ct)
                .ok_or_else(|| patch_status(&PatchError::unsupported_media_type(true)))?;
            let query = req.uri().query().map(str::to_string);
            let body = read_body(req).await?;
            let ops = ops_for(state, dry_run::check(query.as_deref(), "PatchOptions")?);
            ops.patch_scale(rt, ns, name, ty, &body)?
        }
        _ => return Err(Status::method_not_allowed()),
    };
    answer(&scale, wire)
}

/// `autoscaling/v1`, the group version of `Scale`.
const SCALE_API_VERSION: &str = "autoscaling/v1";

/// The answer of a scale write, or of a protobuf GET: the Scale as negotiated (a Table is
/// answered with the Scale itself, as the simulator's writes always were).
fn answer(scale: &Value, wire: Negotiated) -> Result<Response<Body>, Status> {
    Ok(match wire.encoding {
        Encoding::Protobuf => kube_wire::response::protobuf_response(
            StatusCode::OK,
            protobuf::typed_object(SCALE_API_VERSION, "Scale", scale, wire.repr)?,
        ),
        Encoding::Json | Encoding::Yaml => json_response(StatusCode::OK, table::to_go_json(scale)),
    })
}
