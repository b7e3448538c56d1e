//! OpenAPI v2 (`/openapi/v2`), derived from the v3 documents: one document with every group
//! version's paths and schemas, written as Swagger 2.0 writes them.

use serde_json::{Map, Value, json};

/// The v2 document of the v3 documents `docs`, with the `info` of the first.
pub(super) fn from_v3(docs: &[Value]) -> Value {
    let mut paths = Map::new();
    let mut definitions = Map::new();
    for doc in docs {
        for (path, item) in doc["paths"].as_object().into_iter().flatten() {
            paths.insert(path.clone(), to_v2_path(item.clone()));
        }
        let schemas = doc["components"]["schemas"].as_object();
        for (name, schema) in schemas.into_iter().flatten() {
            definitions.insert(name.clone(), to_v2(schema.clone()));
        }
    }
    json!({
        "swagger": "2.0",
        "info": docs.first().map(|d| d["info"].clone()).unwrap_or(Value::Null),
        "paths": paths,
        "definitions": definitions,
        "securityDefinitions": {"BearerToken": {
            "description": "Bearer Token authentication",
            "type": "apiKey",
            "name": "authorization",
            "in": "header",
        }},
        "security": [{"BearerToken": []}],
    })
}

/// A v3 schema as OpenAPI v2 writes it: definitions instead of components, a lone `allOf`
/// reference as a plain `$ref`, no `nullable`.
fn to_v2(schema: Value) -> Value {
    match schema {
        Value::Object(mut map) => {
            map.remove("nullable");
            if let Some(Value::Array(all_of)) = map.get("allOf")
                && all_of.len() == 1
                && all_of[0].get("$ref").is_some()
            {
                let reference = all_of[0]["$ref"].clone();
                map.remove("allOf");
                map.remove("default");
                map.insert("$ref".to_owned(), reference);
            }
            Value::Object(map.into_iter().map(|(k, v)| (k, to_v2(v))).collect())
        }
        Value::Array(items) => Value::Array(items.into_iter().map(to_v2).collect()),
        Value::String(s) => Value::String(s.replace("#/components/schemas/", "#/definitions/")),
        other => other,
    }
}

/// An OpenAPI v3 path item as v2 writes it: parameters with their type inline, a request body
/// as an `in: body` parameter, responses with a schema and no content map.
fn to_v2_path(item: Value) -> Value {
    let Value::Object(item) = item else {
        return item;
    };
    let mut out = Map::new();
    for (key, value) in item {
        if key == "parameters" {
            out.insert(key, v2_params(value, None));
            continue;
        }
        let Value::Object(mut operation) = value else {
            continue;
        };
        let request = operation.remove("requestBody");
        let mut consumes = Vec::new();
        let mut body_schema = None;
        if let Some(request) = &request
            && let Some(Value::Object(types)) = request.get("content")
        {
            for (media, spec) in types {
                consumes.push(json!(media));
                body_schema.get_or_insert_with(|| spec["schema"].clone());
            }
        }
        let params = operation.remove("parameters").unwrap_or(json!([]));
        let params = v2_params(params, body_schema);
        if params.as_array().is_some_and(|p| !p.is_empty()) {
            operation.insert("parameters".into(), params);
        }
        if !consumes.is_empty() {
            operation.insert("consumes".into(), Value::Array(consumes));
        }
        let mut produces = Vec::new();
        if let Some(Value::Object(responses)) = operation.get_mut("responses") {
            for response in responses.values_mut() {
                if let Some(Value::Object(types)) = response.get("content").cloned() {
                    for (media, spec) in types {
                        if !produces.contains(&json!(media)) {
                            produces.push(json!(media));
                        }
                        response["schema"] = spec["schema"].clone();
                    }
                    if let Some(map) = response.as_object_mut() {
                        map.remove("content");
                    }
                }
            }
        }
        if !produces.is_empty() {
            operation.insert("produces".into(), Value::Array(produces));
        }
        operation.insert("schemes".into(), json!(["https"]));
        out.insert(key, to_v2(Value::Object(operation)));
    }
    Value::Object(out)
}

fn v2_params(params: Value, body: Option<Value>) -> Value {
    let mut out: Vec<Value> = params
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|mut p| {
            if let Some(Value::Object(schema)) = p.as_object_mut().and_then(|m| m.remove("schema"))
            {
                for (k, v) in schema {
                    p[k.as_str()] = v;
                }
            }
            p
        })
        .collect();
    if let Some(schema) = body {
        out.insert(
            0,
            json!({"name": "body", "in": "body", "required": true, "schema": to_v2(schema)}),
        );
    }
    Value::Array(out)
}
