#!/usr/bin/python3
"""k8s_podman — turns deploy/k8s/base into what `podman kube play` runs on
one machine, for tests/k8s_e2e.sh. The manifests stay true to Kubernetes;
every difference podman needs is made here, and only here:

- podman has no Services and no cluster DNS: every pod gets hostNetwork
  and the endpoints (the ConfigMap's, the --connect/--endpoint arguments
  naming the Service quorum-coordinator) become 127.0.0.1 with the
  test's free ports; Services and the PodDisruptionBudget are dropped;
- podman plays no StatefulSet: its template becomes one Pod per replica
  (quorum-worker-0, -1, ...), each given another node name, as if the
  pods had been scheduled on different nodes (one per node is what the
  anti-affinity asks; dropped, podman has no scheduler);
- the downward API (metadata.name, spec.nodeName), envFrom and the
  $(VAR) references in env values and args are resolved here, as the
  kubelet does;
- the model's PersistentVolumeClaim is a named podman volume the test
  creates and fills beforehand (the claim's document is dropped);
- Secret volumes: podman 4.3's kube play crashes on them (a nil
  dereference in VolumeFromSecret): each Secret's keys are written to
  files under --secrets-dir, of the volume's defaultMode and owned by the
  pod's runAsUser, and mounted as a hostPath directory instead (an
  optional one whose Secret is not there: an empty directory, as the
  kubelet mounts it);
- emptyDir volumes: podman 4.3 names the volume after the manifest's
  volume name, so two pods' "shm" would be one: each gets its pod's name
  in front (Kubernetes gives each pod its own);
- Secrets: the manifests hold none (the operator makes them with
  kubectl, deploy/k8s/README.md): --secret NAME/KEY=FILE makes one, a
  key at a time, as `kubectl create secret generic NAME
  --from-file=KEY=FILE` does; a Secret volume whose Secret is not made is
  an error (an optional one, an empty directory);
- probes: podman turns a livenessProbe into a healthcheck run by systemd
  timers, which a container host without systemd lacks; the readiness of
  each role is what the test waits on instead (quorum status lists the
  workers, /health answers 200). They are dropped.

  k8s_podman.py BASE_DIR|OVERLAY_DIR OUT.yaml --image TAG --name CLUSTER \
      --client-port P --worker-port P --http-port P --secrets-dir DIR
      [--secret NAME/KEY=FILE ...] [--nodes a,b]

It also checks every document of BASE_DIR and of the overlays and their
components (required fields, see schema_check) and that the base's image
tag is the file VERSION (the tag `make image` gives), and exits 1 on any
finding.

  k8s_podman.py --check-rendered DIR

checks the overlays `kubectl kustomize` rendered into DIR (check_rendered:
the components combine).
"""
import argparse
import base64
import copy
import os
import re
import sys

import yaml

REQ = {
    "*": ["apiVersion", "kind", "metadata.name"],
    "Deployment": ["spec.selector.matchLabels", "spec.template.metadata.labels",
                   "spec.template.spec.containers"],
    "StatefulSet": ["spec.selector.matchLabels", "spec.serviceName",
                    "spec.template.metadata.labels",
                    "spec.template.spec.containers"],
    "Service": ["spec.ports"],
    "ConfigMap": ["data"],
    "Secret": [],
    "PersistentVolumeClaim": ["spec.accessModes", "spec.resources.requests.storage"],
    "PodDisruptionBudget": ["spec.selector.matchLabels"],
    "NetworkPolicy": ["spec.podSelector", "spec.policyTypes"],
    "Kustomization": [],
    "Component": [],
}
API = {"Deployment": "apps/v1", "StatefulSet": "apps/v1", "Service": "v1",
       "ConfigMap": "v1", "Secret": "v1", "PersistentVolumeClaim": "v1",
       "PodDisruptionBudget": "policy/v1",
       "NetworkPolicy": "networking.k8s.io/v1",
       "Kustomization": "kustomize.config.k8s.io/v1beta1",
       "Component": "kustomize.config.k8s.io/v1alpha1"}


def get(d, path):
    for k in path.split("."):
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d


def schema_check(doc, where, patch=False):
    """Required fields of the kinds used, and for workloads that every
    container names an image and every mount a declared volume, and that
    the selector matches the template's labels."""
    errs = []
    kind = doc.get("kind")
    if kind not in API:
        return ["%s: unknown kind %r" % (where, kind)]
    if doc.get("apiVersion") != API[kind]:
        errs.append("%s: %s wants apiVersion %s" % (where, kind, API[kind]))
    if kind in ("Kustomization", "Component"):
        return errs
    for f in REQ["*"] + ([] if patch else REQ[kind]):
        if get(doc, f) in (None, "", [], {}):
            if not (kind == "Secret" or f == "data"):
                errs.append("%s: %s %s lacks %s" % (where, kind, get(doc, "metadata.name"), f))
    spec = get(doc, "spec.template.spec")
    if spec and not patch:
        sel = get(doc, "spec.selector.matchLabels") or {}
        lab = get(doc, "spec.template.metadata.labels") or {}
        if any(lab.get(k) != v for k, v in sel.items()):
            errs.append("%s: selector does not match the template" % where)
        vols = {v["name"] for v in spec.get("volumes", [])}
        for c in spec.get("containers", []) + spec.get("initContainers", []):
            for f in ("name", "image"):
                if not c.get(f):
                    errs.append("%s: a container lacks %s" % (where, f))
            for m in c.get("volumeMounts", []):
                if m.get("name") not in vols or not m.get("mountPath"):
                    errs.append("%s: %s mounts undeclared volume %s" %
                                (where, c.get("name"), m.get("name")))
            for p in ("readinessProbe", "livenessProbe"):
                if p not in c and kind != "Job" and c in spec.get("containers", []):
                    errs.append("%s: %s has no %s" % (where, c.get("name"), p))
            if "resources" not in c and c in spec.get("containers", []):
                errs.append("%s: %s has no resources" % (where, c.get("name")))
    return errs


def load_dir(d, patch=False):
    k = yaml.safe_load(open(os.path.join(d, "kustomization.yaml")))
    errs = schema_check(k, d + "/kustomization.yaml")
    docs = []
    for r in k.get("resources", []):
        p = os.path.join(d, r)
        if os.path.isdir(p):
            continue
        for x in yaml.safe_load_all(open(p)):
            if x:
                errs += schema_check(x, p)
                docs.append(x)
    for pt in k.get("patches", []):
        p = os.path.join(d, pt["path"])
        for x in yaml.safe_load_all(open(p)):
            if x:
                errs += schema_check(x, p, patch=True)
    for c in k.get("components", []):
        errs += load_dir(os.path.join(d, c), patch=True)[2]
    return k, docs, errs


def subst(s, env):
    return re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                  lambda m: env.get(m.group(1), m.group(0)), s)


def resolve(c, pod, node, cms):
    """The kubelet's part: env from the downward API and ConfigMaps,
    $(VAR) in env values and args."""
    env = {}
    for ef in c.pop("envFrom", []):
        env.update(cms[ef["configMapRef"]["name"]])
    out = []
    for e in c.get("env", []):
        if "valueFrom" in e:
            f = e["valueFrom"]["fieldRef"]["fieldPath"]
            v = {"metadata.name": pod, "spec.nodeName": node}[f]
        else:
            v = subst(e.get("value", ""), env)
        env[e["name"]] = v
    for k, v in env.items():
        out.append({"name": k, "value": v})
    c["env"] = out
    for key in ("args", "command"):
        if key in c:
            c[key] = [subst(a, env) for a in c[key]]


def render(d):
    """The documents of the kustomization in directory d, for the
    overlays whose components patch only ConfigMaps and Secrets (as
    overlays/curve's do): resources (files and directories), components'
    resources and patches, then its own patches; a ConfigMap's or
    Secret's patch merges its keys into the document's. Anything else is
    kubectl's to render (exit 1, saying so), never approximated."""
    k = yaml.safe_load(open(os.path.join(d, "kustomization.yaml")))
    docs = []
    for r in k.get("resources", []):
        p = os.path.join(d, r)
        docs += render(p) if os.path.isdir(p) else [
            x for x in yaml.safe_load_all(open(p)) if x]
    patches = []
    for c in k.get("components", []):
        cd = os.path.join(d, c)
        ck = yaml.safe_load(open(os.path.join(cd, "kustomization.yaml")))
        for r in ck.get("resources", []):
            docs += [x for x in yaml.safe_load_all(open(os.path.join(cd, r))) if x]
        patches += [os.path.join(cd, pt["path"]) for pt in ck.get("patches", [])]
    patches += [os.path.join(d, pt["path"]) for pt in k.get("patches", [])]
    for p in patches:
        for x in yaml.safe_load_all(open(p)):
            if not x:
                continue
            t = [y for y in docs if y["kind"] == x["kind"] and
                 y["metadata"]["name"] == x["metadata"]["name"]]
            if x["kind"] not in ("ConfigMap", "Secret") or len(t) != 1:
                sys.exit("%s: a %s patch: render it with kubectl kustomize"
                         % (p, x["kind"]))
            for f in ("data", "stringData"):
                if f in x:
                    t[0].setdefault(f, {}).update(x[f])
    return docs


def check_rendered(d):
    """The overlays as `kubectl kustomize` rendered them into d
    (kustomize-NAME.yaml): the components combine. With CURVE on the
    config says so and the workers' probes have a client key; in every
    overlay each container of each workload mounts the keys (an empty
    directory without CURVE), the large component's extra workers too,
    and no overlay holds a Secret (applying it would overwrite the
    operator's)."""
    for name, curve, workers in (("base", False, 2), ("curve", True, 2),
                                 ("large", False, 4), ("large-curve", True, 4)):
        docs = [x for x in yaml.safe_load_all(
            open(os.path.join(d, "kustomize-%s.yaml" % name))) if x]
        cm = {x["metadata"]["name"]: x["data"] for x in docs
              if x["kind"] == "ConfigMap"}
        if ("curve: true" in cm["quorum-config"]["cluster.yaml"]) != curve:
            return "%s: security.curve is not %s" % (name, curve)
        if bool(cm["quorum-worker-env"].get("QUORUM_CLIENT_ARGS")) != curve:
            return "%s: the workers' probes' client key" % name
        if any(x["kind"] == "Secret" for x in docs):
            return "%s: a Secret in the manifests (applying would " \
                   "overwrite the operator's)" % name
        for x in docs:
            if x["kind"] not in ("Deployment", "StatefulSet"):
                continue
            cs = x["spec"]["template"]["spec"]["containers"]
            if x["metadata"]["name"] == "quorum-worker" and len(cs) != workers:
                return "%s: %d worker containers" % (name, len(cs))
            for c in cs:
                if "/run/quorum/curve" not in [m["mountPath"] for m in
                                               c.get("volumeMounts", [])]:
                    return "%s: %s/%s does not mount the CURVE keys" % (
                        name, x["metadata"]["name"], c["name"])
    # what render() makes of overlays/curve (the play's manifests) is
    # kubectl's rendering, the images' names aside
    def key(docs):
        out = {}
        for x in copy.deepcopy(docs):
            for c in (get(x, "spec.template.spec.containers") or []) + \
                     (get(x, "spec.template.spec.initContainers") or []):
                c["image"] = "quorum"
            out[(x["kind"], x["metadata"]["name"])] = x
        return out
    mine = key(render(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                   "..", "deploy", "k8s", "overlays", "curve")))
    theirs = key([x for x in yaml.safe_load_all(
        open(os.path.join(d, "kustomize-curve.yaml"))) if x])
    for k in sorted(set(mine) | set(theirs)):
        if mine.get(k) != theirs.get(k):
            return "overlays/curve: %s %s rendered unlike kubectl kustomize" % k
    return None


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--check-rendered":
        why = check_rendered(sys.argv[2])
        if why:
            print(why, file=sys.stderr)
            sys.exit(1)
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("base")
    ap.add_argument("out")
    ap.add_argument("--image", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--client-port", required=True)
    ap.add_argument("--worker-port", required=True)
    ap.add_argument("--http-port", required=True)
    ap.add_argument("--secrets-dir", required=True)
    ap.add_argument("--secret", action="append", default=[])
    ap.add_argument("--nodes", default="node-a,node-b")
    a = ap.parse_args()

    if os.path.isdir(os.path.join(a.base, "..", "..", "components")):
        # an overlay (of deploy/k8s/overlays): rendered here (render)
        docs = render(a.base)
        errs = [e for x in docs for e in schema_check(x, a.base)]
    else:
        kz, docs, errs = load_dir(a.base)
        # the image tag the manifests name is the version make image tags
        vf = os.path.join(a.base, "..", "..", "..", "VERSION")
        version = open(vf).read().strip() if os.path.exists(vf) else None
        for im in kz.get("images", []):
            if version and im.get("newTag") != version:
                errs.append("%s/kustomization.yaml: image tag %s, VERSION is %s"
                            % (a.base, im.get("newTag"), version))
        ov = os.path.join(a.base, "..", "overlays")
        for o in sorted(os.listdir(ov)) if os.path.isdir(ov) else []:
            errs += load_dir(os.path.join(ov, o), patch=True)[2]
    if errs:
        print("\n".join("schema: " + e for e in errs), file=sys.stderr)
        sys.exit(1)

    cep = "tcp://127.0.0.1:%s" % a.client_port
    wep = "tcp://127.0.0.1:%s" % a.worker_port
    cms = {}
    secrets = {}
    out = []
    for d in docs:
        kind = d["kind"]
        if kind == "ConfigMap":
            d = copy.deepcopy(d)
            if "cluster.yaml" in d["data"]:
                t = d["data"]["cluster.yaml"]
                t = re.sub(r"client_endpoint: .*", "client_endpoint: " + cep, t)
                t = re.sub(r"worker_endpoint: .*", "worker_endpoint: " + wep, t)
                t = re.sub(r"listen: .*", "listen: 127.0.0.1:" + a.http_port, t)
                t = re.sub(r"(cluster:\n\s+name:) .*", r"\1 " + a.name, t)
                d["data"]["cluster.yaml"] = t
            cms[d["metadata"]["name"]] = d["data"]
            out.append(d)
        elif kind == "Secret":
            secrets[d["metadata"]["name"]] = dict(d.get("stringData", {}))
            for k, v in d.get("data", {}).items():
                secrets[d["metadata"]["name"]][k] = base64.b64decode(v).decode()
    for sv in a.secret:
        m = re.fullmatch(r"([^/=]+)/([^/=]+)=(.+)", sv)
        if not m:
            print("--secret %s: not NAME/KEY=FILE" % sv, file=sys.stderr)
            sys.exit(1)
        secrets.setdefault(m.group(1), {})[m.group(2)] = open(m.group(3)).read()
    for d in docs:
        kind = d["kind"]
        if kind not in ("Deployment", "StatefulSet"):
            continue
        tpl = copy.deepcopy(d["spec"]["template"])
        spec = tpl["spec"]
        spec["hostNetwork"] = True
        spec.pop("affinity", None)
        for c in spec.get("initContainers", []) + spec["containers"]:
            c["image"] = a.image
            c.pop("readinessProbe", None)
            c.pop("livenessProbe", None)
            c.pop("ports", None)
            for key in ("args", "command"):
                if key in c:
                    c[key] = [x.replace("tcp://quorum-coordinator:7700", cep)
                              .replace("tcp://quorum-coordinator:7701", wep)
                              for x in c[key]]
            for e in c.get("env", []):
                if "value" in e:
                    e["value"] = (e["value"]
                                  .replace("tcp://quorum-coordinator:7700", cep)
                                  .replace("tcp://quorum-coordinator:7701", wep))
        uid = spec.get("securityContext", {}).get("runAsUser", 0)
        rename = {}
        for v in spec.get("volumes", []):
            if "secret" in v:
                sv = v.pop("secret")
                dst = os.path.join(a.secrets_dir, d["metadata"]["name"], v["name"])
                os.makedirs(dst, exist_ok=True)
                if sv["secretName"] not in secrets and sv.get("optional"):
                    data, items = {}, []  # an empty directory, as the kubelet
                elif sv["secretName"] not in secrets:
                    # the kubelet would wait for it
                    sys.exit("Secret %s: not made (--secret %s/KEY=FILE)"
                             % (sv["secretName"], sv["secretName"]))
                else:
                    data = secrets[sv["secretName"]]
                    items = sv.get("items") or [{"key": k, "path": k} for k in data]
                for it in items:
                    f = os.path.join(dst, it["path"])
                    with open(f, "w") as fh:
                        fh.write(data[it["key"]])
                    os.chmod(f, sv.get("defaultMode", 0o644))
                    os.chown(f, uid, uid)
                v["hostPath"] = {"path": os.path.abspath(dst), "type": "Directory"}
            if "emptyDir" in v:
                rename[v["name"]] = "%s-%s" % (d["metadata"]["name"], v["name"])
                v["name"] = rename[v["name"]]
        for c in spec.get("initContainers", []) + spec["containers"]:
            for m in c.get("volumeMounts", []):
                m["name"] = rename.get(m["name"], m["name"])
        if kind == "Deployment":
            dd = copy.deepcopy(d)
            dd["spec"]["template"] = tpl
            out.append(dd)
            continue
        nodes = a.nodes.split(",")
        for i in range(d["spec"]["replicas"]):
            name = "%s-%d" % (d["metadata"]["name"], i)
            t = copy.deepcopy(tpl)
            # each pod its own emptyDir
            pre = d["metadata"]["name"] + "-"
            for v in t["spec"].get("volumes", []):
                if "emptyDir" in v:
                    v["name"] = v["name"].replace(pre, name + "-", 1)
            for c in t["spec"]["containers"]:
                for m in c.get("volumeMounts", []):
                    if m["name"].startswith(pre):
                        m["name"] = m["name"].replace(pre, name + "-", 1)
            for c in t["spec"].get("initContainers", []) + t["spec"]["containers"]:
                resolve(c, name, nodes[i % len(nodes)], cms)
            pod = {"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": name,
                                "labels": t["metadata"].get("labels", {})},
                   "spec": t["spec"]}
            out.append(pod)
    with open(a.out, "w") as f:
        yaml.safe_dump_all(out, f, sort_keys=False)


if __name__ == "__main__":
    main()
