#!/usr/bin/env python3
"""Checks k8s/mpijob.yaml and what k8s/render.sh makes of it against the MPIJob CRD's schema.

  tests/k8s/check_mpijob.py [--crd CRD.yaml] [--manifest FILE ...]

Without --manifest: the template as committed, and renderings for 1, 4 and 64 workers with the
repository's experiments. Each MPIJob is validated against the CRD's kubeflow.org/v2beta1
openAPIV3Schema (python3-jsonschema), strictly: a field the schema does not declare is an error, as
`kubectl apply --validate=strict` makes it (the API server would otherwise drop it silently). Then
what the schema cannot say: the job runs the master on the launcher (runLauncherAsWorker, MPICH),
mpiexec takes its rank count from the operator's hostfile, every pod has one GPU and the volumes it
mounts, and the ConfigMap carries the experiment file unchanged. The check must be able to fail:
it also feeds itself broken manifests (an unknown field, a wrong type, a missing GPU) and expects
each to be refused.
"""
import argparse
import copy
import os
import subprocess
import sys

import jsonschema
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def strict(schema):
    """The schema with additionalProperties: false wherever an object lists its properties and
    does not keep unknown fields (Kubernetes' structural schemas prune them instead)."""
    s = copy.deepcopy(schema)

    def walk(node):
        if isinstance(node, dict):
            if ("properties" in node and "additionalProperties" not in node
                    and not node.get("x-kubernetes-preserve-unknown-fields")):
                node["additionalProperties"] = False
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(s)
    return s


def load_schema(crd_path):
    with open(crd_path) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    crd = next((d for d in docs if d.get("kind") == "CustomResourceDefinition"), None)
    if crd is None or crd["spec"]["names"]["kind"] != "MPIJob":
        sys.exit(f"{crd_path}: no CustomResourceDefinition of kind MPIJob")
    for v in crd["spec"]["versions"]:
        if v["name"] == "v2beta1":
            return strict(v["schema"]["openAPIV3Schema"])
    sys.exit(f"{crd_path}: the CRD has no version v2beta1")


def without_nulls(node):
    """The object as the API server stores it: a field set to null is dropped."""
    if isinstance(node, dict):
        return {k: without_nulls(v) for k, v in node.items() if v is not None}
    if isinstance(node, list):
        return [without_nulls(v) for v in node]
    return node


def schema_errors(validator, job):
    job = without_nulls(job)
    return [f"{'/'.join(str(p) for p in e.absolute_path) or '(top)'}: {e.message}"
            for e in sorted(validator.iter_errors(job), key=lambda e: list(map(str, e.absolute_path)))]


def semantic_errors(job):
    """What the job needs beyond the schema."""
    errors = []
    spec = job.get("spec", {})
    if job.get("apiVersion") != "kubeflow.org/v2beta1" or job.get("kind") != "MPIJob":
        errors.append("not a kubeflow.org/v2beta1 MPIJob")
    if spec.get("mpiImplementation") != "MPICH":
        errors.append("mpiImplementation must be MPICH (the image's MPI)")
    if spec.get("runLauncherAsWorker") is not True:
        errors.append("runLauncherAsWorker must be true: rank 0, the master, runs on the launcher")
    if spec.get("slotsPerWorker", 1) != 1:
        errors.append("slotsPerWorker must be 1: one rank (one GPU) per Worker pod")
    replicas = spec.get("mpiReplicaSpecs", {})
    if set(replicas) != {"Launcher", "Worker"}:
        errors.append(f"mpiReplicaSpecs must be Launcher and Worker, found {sorted(replicas)}")
        return errors
    if replicas["Launcher"].get("replicas", 1) != 1:
        errors.append("one launcher")
    workers = replicas["Worker"].get("replicas", 0)
    if not isinstance(workers, int) or workers < 1:
        errors.append("at least one Worker replica")
    for role, rs in replicas.items():
        pod = rs["template"]["spec"]
        vols = {v["name"] for v in pod.get("volumes", [])}
        for c in pod["containers"]:
            where = f"{role}/{c['name']}"
            gpus = c.get("resources", {}).get("limits", {}).get("nvidia.com/gpu")
            if str(gpus) != "1":
                errors.append(f"{where}: limits nvidia.com/gpu must be 1, found {gpus}")
            for m in c.get("volumeMounts", []):
                if m["name"] not in vols:
                    errors.append(f"{where}: mounts '{m['name']}', which the pod does not define")
            mounts = {m["mountPath"] for m in c.get("volumeMounts", [])}
            for need in ("/data", "/runs", "/dev/shm"):
                if need not in mounts:
                    errors.append(f"{where}: nothing mounted at {need}")
    launcher = replicas["Launcher"]["template"]["spec"]["containers"][0]
    command = " ".join(launcher.get("command", []) + launcher.get("args", []))
    if "mpiexec.mpich mpigan train /experiment/experiment.yaml" not in command:
        errors.append(f"the launcher must run mpiexec.mpich mpigan train /experiment/experiment.yaml: {command}")
    if " -n " in command or " -np " in command:
        errors.append("the launcher's mpiexec must take the rank count from the operator's hostfile, not -n")
    if "--resume" not in command:
        errors.append("a restarted launcher must resume the run")
    worker = replicas["Worker"]["template"]["spec"]["containers"][0]
    if worker.get("command") != ["mpigan-sshd"]:
        errors.append(f"Worker pods must run mpigan-sshd, found {worker.get('command')}")
    return errors


def check_rendering(validator, workers, image, experiment, name):
    out = subprocess.run([os.path.join(ROOT, "k8s", "render.sh"), "--workers", str(workers), "--image", image,
                          "--experiment", experiment, "--name", name],
                         check=True, capture_output=True, text=True).stdout
    docs = [d for d in yaml.safe_load_all(out) if d]
    assert [d["kind"] for d in docs] == ["ConfigMap", "MPIJob"], [d["kind"] for d in docs]
    cm, job = docs
    errors = schema_errors(validator, job) + semantic_errors(job)
    with open(experiment) as f:
        if cm["data"]["experiment.yaml"] != f.read():
            errors.append("the ConfigMap's experiment.yaml differs from the experiment file")
    spec = job["spec"]["mpiReplicaSpecs"]
    if spec["Worker"]["replicas"] != workers:
        errors.append(f"Worker replicas {spec['Worker']['replicas']}, asked {workers}")
    for role in ("Launcher", "Worker"):
        if spec[role]["template"]["spec"]["containers"][0]["image"] != image:
            errors.append(f"{role}: image not {image}")
    if job["metadata"]["name"] != name or cm["metadata"]["name"] != f"{name}-experiment":
        errors.append(f"names: job {job['metadata']['name']}, ConfigMap {cm['metadata']['name']}; asked {name}")
    vols = spec["Launcher"]["template"]["spec"]["volumes"]
    if next(v for v in vols if v["name"] == "experiment")["configMap"]["name"] != f"{name}-experiment":
        errors.append("the launcher does not mount the rendered ConfigMap")
    if f"run=/runs/{name};" not in spec["Launcher"]["template"]["spec"]["containers"][0]["args"][0]:
        errors.append(f"the run directory is not /runs/{name}")
    return errors


def must_refuse(validator, job, how, expect):
    broken = copy.deepcopy(job)
    how(broken)
    found = schema_errors(validator, broken) + semantic_errors(broken)
    if not any(expect in e for e in found):
        return [f"a broken manifest was not refused ({expect}): {found}"]
    return []


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--crd", default=os.path.join(ROOT, "k8s", "crd", "kubeflow.org_mpijobs.yaml"))
    p.add_argument("--manifest", action="append", default=[], help="an MPIJob file to check (repeatable)")
    a = p.parse_args()
    validator = jsonschema.Draft7Validator(load_schema(a.crd))
    failures = []

    def report(what, errors):
        print(f"{'FAIL' if errors else 'ok  '} {what}")
        for e in errors:
            print(f"       {e}")
        failures.extend(errors)

    if a.manifest:
        for m in a.manifest:
            with open(m) as f:
                for job in (d for d in yaml.safe_load_all(f) if d and d.get("kind") == "MPIJob"):
                    report(m, schema_errors(validator, job) + semantic_errors(job))
        return 1 if failures else 0

    with open(os.path.join(ROOT, "k8s", "mpijob.yaml")) as f:
        template = yaml.safe_load(f)
    report("k8s/mpijob.yaml against the CRD", schema_errors(validator, template) + semantic_errors(template))
    for workers, exp, name in ((1, "examples/quickstart.yaml", "quick"),
                               (4, "examples/3dgan-25-gpu.yaml", "mpigan"),
                               (64, "examples/3dgan-25-gpu.yaml", "daint-64")):
        report(f"k8s/render.sh --workers {workers} --experiment {exp}",
               check_rendering(validator, workers, "registry.example.org/hep/mpigan:0.1.0",
                               os.path.join(ROOT, exp), name))
    # Broken manifests the check must refuse.
    launcher = ("spec", "mpiReplicaSpecs", "Launcher", "template", "spec", "containers", 0)

    def at(job, path):
        for k in path:
            job = job[k]
        return job

    report("refuses a misspelt field (slotPerWorker)", must_refuse(
        validator, template, lambda j: j["spec"].update(slotPerWorker=1), "slotPerWorker"))
    report("refuses a misspelt container field (volumeMount)", must_refuse(
        validator, template, lambda j: at(j, launcher).update(volumeMount=[]), "volumeMount"))
    report("refuses replicas given as text", must_refuse(
        validator, template, lambda j: j["spec"]["mpiReplicaSpecs"]["Worker"].update(replicas="4"), "replicas"))
    report("refuses an MPI implementation the operator does not know", must_refuse(
        validator, template, lambda j: j["spec"].update(mpiImplementation="MVAPICH"), "mpiImplementation"))
    report("refuses a worker without its GPU", must_refuse(
        validator, template,
        lambda j: j["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["resources"][
            "limits"].pop("nvidia.com/gpu"), "nvidia.com/gpu"))
    report("refuses a fixed rank count", must_refuse(
        validator, template, lambda j: at(j, launcher)["args"].__setitem__(
            0, at(j, launcher)["args"][0].replace("mpiexec.mpich mpigan", "mpiexec.mpich -n 5 mpigan")), "-n"))
    bad = subprocess.run([os.path.join(ROOT, "k8s", "render.sh"), "--workers", "0", "--image", "x",
                          "--experiment", os.path.join(ROOT, "examples", "quickstart.yaml")],
                         capture_output=True, text=True)
    report("render.sh refuses --workers 0", [] if bad.returncode == 2 and "--workers" in bad.stderr
           else [f"status {bad.returncode}: {bad.stderr.strip()}"])
    print(f"{len(failures)} problem(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
