/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The hwloc loader: builds a `struct topo` from an hwloc XML export or from the live machine.
 * A separate small static library (topofit-topology-hwloc) so that the pure topology core
 * never links hwloc; the plugin and the CLI link it, the extender and scoring do not.
 */
#pragma once

#include "topo.h"

/* Builds a topology from hwloc XML (xml[0..len), not necessarily NUL-terminated, at most
 * TOPO_MAX_XML_BYTES).  GPUs are the NVIDIA/AMD PCI display/3D/accelerator devices, in PCI
 * bus order; NICs the PCI devices carrying OpenFabrics or Network OS devices; PCIe relations
 * come from the PCI tree, NVLink from the "NVLinkBandwidth" distances (NVSwitch ports
 * included), AMD XGMI from "XGMIBandwidth" and "XGMIHops".  hwloc 3 exports (XML version
 * 3.x) are read too.  Returns 0 and a new topology in *ret, or -E2BIG (too large, too many GPUs),
 * -EINVAL (hwloc refused the XML, NUL bytes), -ENODEV (no GPU found), -ENOMEM; err, when
 * non-NULL, says why. */
int topo_hwloc_load_xml(const char *xml, size_t len, struct topo **ret, struct topo_error *err);

/* The same from the running machine (hwloc's own discovery).  Same returns. */
int topo_hwloc_load_live(struct topo **ret, struct topo_error *err);
