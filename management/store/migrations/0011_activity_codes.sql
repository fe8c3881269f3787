-- Activity codes as the reference names them (the dashboard renders
-- events by code): a peer added with a setup key is peer.setupkey.add, a
-- deleted peer user.peer.delete.
UPDATE events SET activity = 'peer.setupkey.add' WHERE activity = 'peer.add';
UPDATE events SET activity = 'user.peer.delete' WHERE activity = 'peer.delete';
