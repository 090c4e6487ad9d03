--[[
greenup's job_submit script for Slurm (job_submit/lua), for sites that hold their power
caps in Slurm's queue (`power.enforce: queue` in greenup.yaml).

Every job holds its watts as Slurm licenses: one license is one watt, `greenup_w` counts
the site's cap and `greenup_w_PARTITION` each capped partition's (slurm.conf's
`Licenses=` line, printed by `greenup site licenses`). Slurm then keeps a job that does
not fit the power left PENDING (reason `Licenses`) until running jobs give their watts
back, and greenup plans the job under the watts it was granted; each node's RAPL limit
holds it to its share.

A job's watts:
- what it asked for (`--licenses=greenup_w:W`, which greenup's cli_filter sets from the
  job's quote), kept within [its fewest nodes x the most a node draws at its lowest
  clock, its most nodes x the most a node draws at its top clock] (the most nodes: -N's
  maximum, else as many as its tasks can spread over, at most the partition's);
- otherwise its nodes' full power: a job greenup does not plan holds what it may draw;
- never more than the cap can grant (its licenses' smallest total): a job that fits
  the cap at its nodes' lowest clock is held to the cap, and greenup plans it within it.
The node bounds come from the table `greenup site licenses --lua` writes (TABLE below), so
the caps and node powers live in greenup.yaml alone.

Under `power.enforce: hres` (Slurm 25.05 and later) the site cap and each rack's are one
hierarchical resource (`resources.yaml`, written by `greenup site licenses --resources`),
which Slurm counts per node: a job holding `greenup_w:P` holds P watts on each of its
nodes, in the site's layer and in each rack its nodes sit in. The script then turns the
job's watts (as asked, or its nodes' full power) into watts a node over its fewest
nodes, within [the most a node draws at its lowest clock, at its top clock] and within
what the racks and the site layer can ever place on that many nodes. A capped
partition's license stays a total: the count a node times the job's most nodes.

This runs inside slurmctld for every submission: it reads one small file and does
arithmetic, and never runs a program. It refuses a job for power only when it can never
run: its fewest nodes draw more than the cap at their lowest clock (Slurm would refuse it
anyway, with no reason given); the message says how many nodes fit. If the table
cannot be read it leaves the job as submitted and logs why (greenupd then plans the job
under its ledger, as before the queue held power).

Only an operator (root or SlurmUser) may change a job's greenup licenses afterwards:
Slurm lets a job's owner change the licenses of a pending job and drop those of a
running one, either of which would let power go unaccounted.

Install: copy to /etc/slurm/job_submit.lua, set JobSubmitPlugins=lua in slurm.conf, add
the Licenses= line, and write the table with
    greenup site licenses /etc/slurm/greenup.yaml --lua /etc/slurm/greenup_power.lua
again whenever the caps change (then `scontrol reconfigure`).
]]

local TABLE = "/etc/slurm/greenup_power.lua"

-- Slurm's "not set" for a 32-bit count, for Slurms whose Lua lacks slurm.NO_VAL.
local NO_VAL = slurm.NO_VAL or 0xfffffffe

local function load_table()
  local ok, t = pcall(dofile, TABLE)
  if not ok or type(t) ~= "table" or type(t.partitions) ~= "table" then
    return nil, tostring(t)
  end
  return t
end

-- The set of greenup's license names in table `t`.
local function greenup_names(t)
  local names = {}
  local function add(entry)
    for _, l in ipairs(entry.licenses or {}) do names[l] = true end
    if entry.node_license then names[entry.node_license] = true end
  end
  for _, e in pairs(t.partitions) do add(e) end
  if t.any then add(t.any) end
  return names
end

-- Split a job's license request into greenup's counts and the rest, kept as written.
local function split_licenses(text, names)
  local mine, rest = {}, {}
  for item in string.gmatch(text or "", "[^,]+") do
    local name, count = string.match(item, "^%s*([^:*@%s]+)[^:*]*[:*]?%s*(%d*)%s*$")
    if name and names[name] then
      mine[name] = tonumber(count) or 1
    else
      table.insert(rest, item)
    end
  end
  return mine, rest
end

-- The table entries of the partitions a job may run in (several for `-p a,b`).
local function entries_for(t, partition, part_list)
  local out = {}
  if partition == nil or partition == "" then
    for name, part in pairs(part_list or {}) do
      if part.flag_default == 1 then partition = name end
    end
  end
  for p in string.gmatch(partition or "", "[^,]+") do
    table.insert(out, t.partitions[p] or t.any)
  end
  if #out == 0 then table.insert(out, t.any) end
  return out
end

-- A count Slurm leaves unset is NO_VAL (32-bit) or NO_VAL16; 0 is unset too.
local function set(n, no_val)
  return n ~= nil and n > 0 and n < (no_val or NO_VAL)
end

-- The fewest and the most nodes the job can get in a partition of `pool` nodes: -N's
-- range; without a maximum, as many as its tasks can spread over (-n, with
-- --ntasks-per-node when given); never more than the partition has. A job holds watts
-- for the most, because Slurm chooses the count only when it starts the job.
local function node_range(job_desc, pool)
  local lo = set(job_desc.min_nodes) and job_desc.min_nodes or 1
  local hi = lo
  if set(job_desc.max_nodes) then
    hi = math.max(hi, job_desc.max_nodes)
  elseif set(job_desc.num_tasks) then
    local k = job_desc.num_tasks
    if set(job_desc.ntasks_per_node, 0xfffe) then
      k = math.ceil(job_desc.num_tasks / job_desc.ntasks_per_node)
    end
    hi = math.max(hi, k)
  end
  if pool and pool > 0 then
    lo, hi = math.min(lo, pool), math.min(hi, pool)
  end
  return lo, hi
end

-- Under hres: the most watts a node may hold when a job spreads over `n` nodes of table
-- entry `e`: the largest whole count such that the racks can place n nodes holding it
-- (a rack of count W holds at most W / count of them) and n of them fit the site layer.
local function node_ceiling(e, n)
  local function fits(p)
    if p * n > e.site_w then return false end
    local k = 0
    for _, r in ipairs(e.racks or {}) do k = k + math.min(r.nodes, math.floor(r.w / p)) end
    return k >= n
  end
  local lo, hi = 0, e.site_w or 0
  while lo < hi do
    local mid = math.floor((lo + hi + 1) / 2)
    if fits(mid) then lo = mid else hi = mid - 1 end
  end
  return lo
end

-- Under hres: the job's licenses, a count a node of the site's resource and the capped
-- partitions' totals; nil and a message for a job that can never run.
local function per_node_licenses(b, want, rest)
  local ceiling = math.huge
  for _, e in ipairs(b.entries) do ceiling = math.min(ceiling, node_ceiling(e, b.fewest)) end
  if b.cap < math.huge then ceiling = math.min(ceiling, math.floor(b.cap / b.fewest)) end
  if b.min_node_w > ceiling then
    return nil, string.format("greenup: a job on %d node(s) draws at least %d W a node at their lowest clock; the racks and power caps grant at most %d W a node to %d node(s): ask for fewer nodes",
      b.fewest, b.min_node_w, ceiling, b.fewest)
  end
  local hi = math.min(b.max_node_w, ceiling)
  local asked = want and math.ceil(want / b.fewest) or hi
  local watts = math.min(math.max(asked, b.min_node_w), hi)
  local note = nil
  if want and watts ~= asked then
    note = string.format("greenup: power asked %d W, held %d W a node: a job on %s node(s) holds %d-%d W a node",
      want, watts, b.nodes, b.min_node_w, hi)
  end
  local list = {}
  for _, item in ipairs(rest) do table.insert(list, item) end
  table.insert(list, string.format("%s:%d", b.node_license, watts))
  for _, l in ipairs(b.flat) do
    table.insert(list, string.format("%s:%d", l, math.floor(math.min(watts * b.most, b.cap))))
  end
  return table.concat(list, ","), note
end

function slurm_job_submit(job_desc, part_list, submit_uid)
  local t, err = load_table()
  if not t then
    slurm.log_error("greenup: %s unreadable, job left as submitted (no power licenses): %s", TABLE, err)
    return slurm.SUCCESS
  end
  if t.enforce ~= "queue" and t.enforce ~= "hres" then return slurm.SUCCESS end
  if job_desc.licenses and string.find(job_desc.licenses, "|", 1, true) then
    slurm.log_user("greenup: --licenses with '|' cannot be combined with the power cap's licenses (%s); use ',' between licenses", job_desc.licenses)
    return slurm.ERROR
  end
  local names = greenup_names(t)
  local asked, rest = split_licenses(job_desc.licenses, names)
  local lo, hi, cap, need = 0, 0, math.huge, {}
  local fewest, most, min_node_w, max_node_w = 1, 1, 0, 0
  local entries, node_license = entries_for(t, job_desc.partition, part_list), nil
  for _, e in ipairs(entries) do
    local a, b = node_range(job_desc, e.nodes)
    fewest, most = math.max(fewest, a), math.max(most, b)
    min_node_w = math.max(min_node_w, e.min_node_w)
    max_node_w = math.max(max_node_w, e.max_node_w)
    node_license = node_license or e.node_license
    lo = math.max(lo, a * e.min_node_w)
    hi = math.max(hi, b * e.max_node_w)
    if e.cap_w then cap = math.min(cap, e.cap_w) end
    for _, l in ipairs(e.licenses) do need[l] = true end
  end
  local sorted = {}
  for l in pairs(need) do table.insert(sorted, l) end
  table.sort(sorted)
  local want = nil
  for _, w in pairs(asked) do want = math.max(want or 0, w) end
  local nodes = fewest == most and tostring(most) or (fewest .. "-" .. most)
  if t.enforce == "hres" and node_license then
    local list, note = per_node_licenses({ entries = entries, fewest = fewest, most = most,
      min_node_w = min_node_w, max_node_w = max_node_w, cap = cap, nodes = nodes,
      node_license = node_license, flat = sorted }, want, rest)
    if not list then
      slurm.log_user("%s", note)
      return slurm.ERROR
    end
    if note then slurm.log_user("%s", note) end
    job_desc.licenses = list
    slurm.log_info("greenup: job of uid %d on %s node(s) holds %s (a count a node of %s)", submit_uid, nodes, list, node_license)
    return slurm.SUCCESS
  end
  -- Slurm refuses a request above a license's total with a bare "Invalid license
  -- specification"; a job whose nodes fit the cap at their lowest clock is clamped to it
  -- instead, and one that can never fit is refused with what would.
  if lo > cap then
    slurm.log_user("greenup: a job on %d node(s) draws at least %d W at their lowest clock; the power cap grants at most %d W: ask for at most %d node(s)",
      fewest, lo, cap, math.max(0, math.floor(cap / math.max(min_node_w, 1))))
    return slurm.ERROR
  end
  hi = math.min(hi, cap)
  local watts = math.floor(math.min(math.max(want or hi, lo), hi) + 0.5)
  if want and watts ~= want then
    slurm.log_user("greenup: power asked %d W, held %d W: a job on %s node(s) holds %d-%d W", want, watts, nodes, lo, hi)
  end
  local list = {}
  for _, item in ipairs(rest) do table.insert(list, item) end
  for _, l in ipairs(sorted) do table.insert(list, l .. ":" .. watts) end
  job_desc.licenses = table.concat(list, ",")
  slurm.log_info("greenup: job of uid %d on %s node(s) holds %d W as %s", submit_uid, nodes, watts, job_desc.licenses)
  return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
  if job_desc.licenses == nil then return slurm.SUCCESS end
  local t = load_table()
  if not t or (t.enforce ~= "queue" and t.enforce ~= "hres") then return slurm.SUCCESS end
  for _, uid in ipairs(t.operators or { 0 }) do
    if modify_uid == uid then return slurm.SUCCESS end
  end
  local names = greenup_names(t)
  local new = split_licenses(job_desc.licenses, names)
  local old = split_licenses(job_rec.licenses, names)
  for l in pairs(names) do
    if new[l] ~= old[l] then
      slurm.log_user("greenup: the power licenses (%s) are set at submission; only an operator may change them", l)
      return slurm.ERROR
    end
  end
  return slurm.SUCCESS
end

slurm.log_info("greenup: job_submit.lua loaded")
return slurm.SUCCESS
