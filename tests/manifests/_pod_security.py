"""The Pod Security Standards' checks on a pod spec, as Pod Security Admission applies them
(`baseline` and `restricted`, enforce-version latest), for the fields the platform's pods
set: host namespaces, privileged, capabilities, hostPath and volume types, host ports,
seccomp, runAsNonRoot / runAsUser, allowPrivilegeEscalation, /proc mount, sysctls.
ref: https://kubernetes.io/docs/concepts/security/pod-security-standards/
"""

from __future__ import annotations

from typing import Any

LEVELS = ("restricted", "baseline", "privileged")  # strictest first

# ref: https://kubernetes.io/docs/concepts/security/pod-security-standards/#baseline (Capabilities)
BASELINE_CAPABILITIES = frozenset(
    {
        "AUDIT_WRITE",
        "CHOWN",
        "DAC_OVERRIDE",
        "FOWNER",
        "FSETID",
        "KILL",
        "MKNOD",
        "NET_BIND_SERVICE",
        "SETFCAP",
        "SETGID",
        "SETPCAP",
        "SETUID",
        "SYS_CHROOT",
    }
)
SAFE_SYSCTLS = frozenset(
    {
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.ip_unprivileged_port_start",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_local_reserved_ports",
        "net.ipv4.tcp_keepalive_time",
        "net.ipv4.tcp_fin_timeout",
        "net.ipv4.tcp_keepalive_intvl",
        "net.ipv4.tcp_keepalive_probes",
    }
)
# ref: https://kubernetes.io/docs/concepts/security/pod-security-standards/#restricted (Volume Types)
RESTRICTED_VOLUMES = frozenset(
    {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret"}
)


def _containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        *(spec.get("initContainers") or []),
        *(spec.get("containers") or []),
        *(spec.get("ephemeralContainers") or []),
    ]


def baseline_violations(spec: dict[str, Any]) -> list[str]:
    out = [f"{k}: true" for k in ("hostNetwork", "hostPID", "hostIPC") if spec.get(k)]
    out += [f"volume {v['name']}: hostPath" for v in spec.get("volumes") or [] if "hostPath" in v]
    pod_ctx = spec.get("securityContext") or {}
    if (pod_ctx.get("seccompProfile") or {}).get("type") == "Unconfined":
        out.append("pod seccompProfile Unconfined")
    out += [f"sysctl {s['name']}" for s in pod_ctx.get("sysctls") or [] if s["name"] not in SAFE_SYSCTLS]
    for c in _containers(spec):
        ctx = c.get("securityContext") or {}
        if ctx.get("privileged"):
            out.append(f"{c['name']}: privileged")
        added = set((ctx.get("capabilities") or {}).get("add") or []) - BASELINE_CAPABILITIES
        if added:
            out.append(f"{c['name']}: adds capabilities {sorted(added)}")
        out += [f"{c['name']}: hostPort {p['hostPort']}" for p in c.get("ports") or [] if p.get("hostPort")]
        if (ctx.get("seccompProfile") or {}).get("type") == "Unconfined":
            out.append(f"{c['name']}: seccompProfile Unconfined")
        if ctx.get("procMount", "Default") != "Default":
            out.append(f"{c['name']}: procMount {ctx['procMount']}")
    return out


def restricted_violations(spec: dict[str, Any]) -> list[str]:
    out = baseline_violations(spec)
    out += [
        f"volume {v['name']}: type {sorted(set(v) - {'name'})} not allowed"
        for v in spec.get("volumes") or []
        if not set(v) - {"name"} <= RESTRICTED_VOLUMES
    ]
    pod_ctx = spec.get("securityContext") or {}
    if pod_ctx.get("runAsUser") == 0:
        out.append("pod runAsUser 0")
    for c in _containers(spec):
        ctx = c.get("securityContext") or {}
        name = c["name"]
        if ctx.get("allowPrivilegeEscalation") is not False:
            out.append(f"{name}: allowPrivilegeEscalation not false")
        if not (
            ctx.get("runAsNonRoot") is True
            or (pod_ctx.get("runAsNonRoot") is True and ctx.get("runAsNonRoot") is not False)
        ):
            out.append(f"{name}: runAsNonRoot not true")
        if ctx.get("runAsUser") == 0:
            out.append(f"{name}: runAsUser 0")
        seccomp = (ctx.get("seccompProfile") or pod_ctx.get("seccompProfile") or {}).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            out.append(f"{name}: seccompProfile {seccomp!r}, not RuntimeDefault or Localhost")
        caps = ctx.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            out.append(f"{name}: capabilities do not drop ALL")
        if set(caps.get("add") or []) - {"NET_BIND_SERVICE"}:
            out.append(f"{name}: adds {sorted(set(caps['add']) - {'NET_BIND_SERVICE'})}")
    return out


def violations(spec: dict[str, Any], level: str) -> list[str]:
    """What keeps a pod spec out of `level` ([] = admitted)."""
    if level == "privileged":
        return []
    return restricted_violations(spec) if level == "restricted" else baseline_violations(spec)


def strictest_level(spec: dict[str, Any]) -> str:
    return next(level for level in LEVELS if not violations(spec, level))
