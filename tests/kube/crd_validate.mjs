// Validates Prometheus Operator objects (ServiceMonitor, PrometheusRule) read as a JSON array
// on stdin with the validators of the npm package @kubernetes-models/prometheus-operator,
// generated from the operator's API types (pkg/apis/monitoring/v1). Prints one line per
// refused object and exits 1 if any was refused.
import { PrometheusRule } from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PrometheusRule";
import { ServiceMonitor } from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/ServiceMonitor";
import { readFileSync } from "node:fs";

const kinds = { PrometheusRule, ServiceMonitor };
const objects = JSON.parse(readFileSync(0, "utf8"));
let refused = 0;
for (const obj of objects) {
  const Model = kinds[obj.kind];
  try {
    if (Model === undefined) throw new Error(`no validator for kind ${obj.kind}`);
    new Model(obj).validate();
  } catch (error) {
    refused += 1;
    console.log(`${obj.kind}/${obj.metadata?.name}: ${error.message}`);
  }
}
process.exit(refused ? 1 : 0);
