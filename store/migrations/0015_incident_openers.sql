-- Who wrote an incident's timeline entry (extensions parts 3, 5 and 7; README "Status
-- pages"). `generated_by`: the monitor or heartbeat whose status move made the engine
-- write the entry (`mon_…` or `hbt_…`, the incident's opener, as `incidents.monitor_id`),
-- null for entries written through the API. The engine writes such entries from the
-- resource's private name ("<name> is up again after 5m 12s"); a public status page never
-- shows their text but builds its own from the component's display name, so it need not
-- recognise them by their wording.
ALTER TABLE incident_updates ADD COLUMN generated_by text;

-- Entries written before this migration, where they can be told: of an incident a
-- monitor or a heartbeat opened, its opening entry (the first, written at its creation
-- with its description) and its recovery (status resolved, the message ending in the
-- time from the incident's opening to the entry, as the engine wrote it).
UPDATE incident_updates u SET generated_by = i.monitor_id
FROM incidents i
WHERE i.id = u.incident_id AND i.monitor_id IS NOT NULL AND (
    (u.status = 'investigating' AND u.created = i.created
     AND u.message IS NOT DISTINCT FROM i.description
     AND u.seq = (SELECT min(f.seq) FROM incident_updates f WHERE f.incident_id = i.id))
    OR (u.status = 'resolved'
        AND u.message LIKE '% is up again after ' || human_duration(u.created - i.created)));
